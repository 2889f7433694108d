/* The floor bfperf is measured against: what a minimal C program pays for the same
 * sysfs work.
 *   floor snapshot FILE...        open, read, close each file; print the values
 *   floor sample MS SECONDS FILE... open each once; every MS milliseconds pread each
 *                                 one and print one line per value, sleeping to
 *                                 absolute deadlines (no polling); a check:FILE is
 *                                 read back and compared, as bfperf reads event<N>;
 *                                 a write:FILE=VALUE is written each tick in its
 *                                 place (an all-at-once block stopped and started);
 *                                 first arguments price what a tick touches
 *                                 (benches/line-cost.sh): touch:N[:P] touches N
 *                                 cache lines of its own memory each tick, P to a
 *                                 4 KiB page (10 unless given, as a bfperf tick's
 *                                 are spread: benches/tick-pages.py; 64 packs them),
 *                                 each load independent of the others; chase:N
 *                                 follows a chain through N lines, ten to a page in
 *                                 a shuffled order, each load waiting for the last;
 *                                 code:N calls N functions a cache line each, eight
 *                                 to a page in a shuffled order (built with
 *                                 -DCODE_LINES and the functions line-cost.sh
 *                                 generates)
 *   floor list DIR...             list each directory; print each entry's name
 *   floor cat FILE...             print each file whole
 *   floor do OP:PATH...           each in turn, OP one of list, cat, read (as snapshot)
 * Built by benches/floor.sh with cc -O2. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ops.h"

static unsigned long long parse(const char *b) { return strtoull(b, NULL, 0); }

static int snapshot(int n, char **files) {
    char buf[4097];
    unsigned long long sum = 0;
    for (int i = 0; i < n; i++) {
        int fd = open(files[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) { perror(files[i]); return 1; }
        ssize_t r = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (r < 0) { perror(files[i]); return 1; }
        buf[r] = 0;
        printf("%s %llu\n", files[i], parse(buf));
        sum += parse(buf);
    }
    return sum == 0xdeadbeef;
}

#ifdef CODE_LINES
unsigned long long run_code(long n);
#else
static unsigned long long run_code(long n) { return (unsigned long long)n; }
#endif

/* A chain through n lines, ten to a page, linked in a shuffled order: following it
 * waits on each line in turn. */
struct link { struct link *next; };
static volatile unsigned long long sink;
static struct link *chain(long n) {
    if (n <= 0) return NULL;
    char *mem = calloc(n / 10 + 1, 4096);
    long *order = malloc(n * sizeof *order);
    if (!mem || !order) return NULL;
    for (long i = 0; i < n; i++) order[i] = i;
    srand(1);
    for (long i = n - 1; i > 0; i--) { long j = rand() % (i + 1), t = order[i]; order[i] = order[j]; order[j] = t; }
#define LINK(k) ((struct link *)(mem + (order[k] / 10) * 4096 + (order[k] % 10) * 384))
    for (long i = 0; i < n; i++) LINK(i)->next = i + 1 < n ? LINK(i + 1) : NULL;
    struct link *first = LINK(0);
#undef LINK
    free(order);
    return first;
}

static int sample(long ms, long seconds, int n, char **files) {
    int *fds = calloc(n, sizeof *fds), *check = calloc(n, sizeof *check);
    unsigned long long *last = calloc(n, sizeof *last);
    char buf[64], **value = calloc(n, sizeof *value);
    /* check:FILE is read back each tick and must keep its first value (an event<N>
     * another program could re-program); write:FILE=VALUE is written each tick, in
     * its place among the reads. */
    long touch = 0, per_page = 10, links = 0, code = 0;
    for (; n > 0; files++, n--) {
        if (!strncmp(files[0], "touch:", 6)) {
            char *at = strchr(files[0] + 6, ':');
            touch = atol(files[0] + 6);
            if (at) per_page = atol(at + 1);
            if (per_page < 1 || per_page > 64) { fprintf(stderr, "touch: 1 to 64 lines a page\n"); return 1; }
        } else if (!strncmp(files[0], "chase:", 6)) {
            links = atol(files[0] + 6);
        } else if (!strncmp(files[0], "code:", 5)) {
            code = atol(files[0] + 5);
#ifndef CODE_LINES
            fprintf(stderr, "code: built without -DCODE_LINES\n");
            return 1;
#endif
        } else {
            break;
        }
    }
    if (open_ops(n, files, fds, check, value)) return 1;
    volatile unsigned char *lines = touch > 0 ? calloc(touch / per_page + 1, 4096) : NULL;
    if (touch > 0 && !lines) { perror("touch:"); return 1; }
    struct link *first = chain(links);
    if (links > 0 && !first) { perror("chase:"); return 1; }
    unsigned long long kept = 0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    long ticks = seconds * 1000 / ms;
    for (long t = 0; t <= ticks; t++) {
        for (int i = 0; i < n; i++) {
            if (value[i]) {
                if (pwrite(fds[i], value[i], strlen(value[i]), 0) < 0) { perror(files[i]); return 1; }
                continue;
            }
            ssize_t r = pread(fds[i], buf, sizeof buf - 1, 0);
            if (r < 0) { perror(files[i]); return 1; }
            buf[r] = 0;
            unsigned long long v = parse(buf);
            if (check[i] && t > 0 && v != last[i]) { fprintf(stderr, "%s changed\n", files[i]); return 1; }
            if (!check[i] && t > 0) printf("%ld %d %llu\n", t, i, v - last[i]);
            last[i] = v;
        }
        for (long k = 0; k < touch; k++) lines[(k / per_page) * 4096 + (k % per_page) * (4096 / per_page / 64 * 64)]++;
        for (struct link *l = first; l; l = l->next) kept++;
        if (code > 0) kept += run_code(code);
        fflush(stdout);
        next.tv_nsec += ms * 1000000L;
        while (next.tv_nsec >= 1000000000L) { next.tv_nsec -= 1000000000L; next.tv_sec++; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    sink = kept; /* what was counted is used, so that it is not left out */
    return 0;
}

static int list(int n, char **dirs) {
    for (int i = 0; i < n; i++) {
        DIR *d = opendir(dirs[i]);
        if (!d) { perror(dirs[i]); return 1; }
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') printf("%s %s\n", dirs[i], e->d_name);
        closedir(d);
    }
    return 0;
}

static int cat(int n, char **files) {
    char buf[65536];
    for (int i = 0; i < n; i++) {
        int fd = open(files[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) { perror(files[i]); return 1; }
        ssize_t r;
        while ((r = read(fd, buf, sizeof buf)) > 0) fwrite(buf, 1, r, stdout);
        close(fd);
        if (r < 0) { perror(files[i]); return 1; }
    }
    return 0;
}

static int each(int n, char **ops) {
    for (int i = 0; i < n; i++) {
        char *path = strchr(ops[i], ':');
        if (!path) { fprintf(stderr, "%s: no OP:\n", ops[i]); return 2; }
        *path++ = 0;
        int r = !strcmp(ops[i], "list") ? list(1, &path)
              : !strcmp(ops[i], "cat") ? cat(1, &path)
              : !strcmp(ops[i], "read") ? snapshot(1, &path) : 2;
        if (r == 2) fprintf(stderr, "%s: no such OP\n", ops[i]);
        if (r) return r;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "do")) return each(argc - 2, argv + 2);
    if (argc > 2 && !strcmp(argv[1], "list")) return list(argc - 2, argv + 2);
    if (argc > 2 && !strcmp(argv[1], "cat")) return cat(argc - 2, argv + 2);
    if (argc > 2 && !strcmp(argv[1], "snapshot")) return snapshot(argc - 2, argv + 2);
    if (argc > 4 && !strcmp(argv[1], "sample"))
        return sample(atol(argv[2]), atol(argv[3]), argc - 4, argv + 4);
    fprintf(stderr, "usage: floor snapshot FILE... | floor sample MS SECONDS FILE... | floor list DIR... | floor cat FILE... | floor do OP:PATH...\n");
    return 2;
}
