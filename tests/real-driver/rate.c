/*
 * rate FILE SECONDS: reads a counter file (the driver's "0x..." or decimal), sleeps,
 * reads it again, and prints the difference and the time between the two reads in
 * nanoseconds (CLOCK_MONOTONIC, the guest's clock): `DELTA NS`. The guest's busybox
 * has no sub-second clock; the suite needs one to check a rate within 0.1 %.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int sample(int fd, unsigned long long *v, long long *ns)
{
    char buf[64];
    struct timespec t;
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    *v = strtoull(buf, NULL, 0);
    *ns = (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
    return 0;
}

int main(int argc, char **argv)
{
    unsigned long long a, b;
    long long ta, tb;
    int fd;

    if (argc != 3) {
        fprintf(stderr, "usage: rate FILE SECONDS\n");
        return 2;
    }
    fd = open(argv[1], O_RDONLY);
    if (fd < 0 || sample(fd, &a, &ta)) {
        perror(argv[1]);
        return 1;
    }
    sleep(atoi(argv[2]));
    if (sample(fd, &b, &tb)) {
        perror(argv[1]);
        return 1;
    }
    /* A 32-bit counter (crspace) that wrapped once between the reads. */
    if (b < a && a <= 0xffffffffULL)
        b += 0x100000000ULL;
    printf("%llu %lld\n", b - a, tb - ta);
    return 0;
}
