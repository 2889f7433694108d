/*
 * A workload that counts only its hot loop, as perf stat --control expects: it
 * writes `enable` and `disable` on the control FIFO and waits for each `ack`.
 *
 *   mkfifo ctl ack
 *   cc -O2 -o phase examples/control/phase.c
 *   bfperf stat -M ddr,llc -D -1 --control fifo:ctl,ack -- ./phase ctl ack
 *
 * Without arguments it runs uninstrumented (and bfperf counts nothing of it).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ctl = -1, ack = -1;

/* Sends a word and waits for bfperf's "ack\n". */
static void say(const char *word)
{
    char buf[8];
    if (ctl < 0)
        return;
    if (write(ctl, word, strlen(word)) < 0 || (ack >= 0 && read(ack, buf, sizeof buf) <= 0))
        perror("control");
}

int main(int argc, char **argv)
{
    size_t n = 64 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b)
        return 1;
    if (argc > 2) {
        ctl = open(argv[1], O_WRONLY);
        ack = open(argv[2], O_RDONLY);
    }
    memset(a, 1, n); /* warm-up: not counted */
    say("enable\n");
    for (int i = 0; i < 20; i++) /* the hot phase */
        memcpy(b, a, n);
    say("disable\n");
    printf("%d\n", b[n - 1]);
    return 0;
}
