/* The floor bfperf is measured against: what a minimal C program pays for the same
 * sysfs work.
 *   floor snapshot FILE...        open, read, close each file; print the values
 *   floor sample MS SECONDS FILE... open each once; every MS milliseconds pread each
 *                                 one and print one line per value, sleeping to
 *                                 absolute deadlines (no polling); a check:FILE is
 *                                 read back and compared, as bfperf reads event<N>;
 *                                 a write:FILE=VALUE is written each tick in its
 *                                 place (an all-at-once block stopped and started);
 *                                 a first argument touch:N also touches N cache
 *                                 lines of its own memory each tick, ten to a 4 KiB
 *                                 page (as a bfperf tick's are spread:
 *                                 benches/tick-pages.py), to price a line
 *                                 (benches/line-cost.sh)
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

static int sample(long ms, long seconds, int n, char **files) {
    int *fds = calloc(n, sizeof *fds), *check = calloc(n, sizeof *check);
    unsigned long long *last = calloc(n, sizeof *last);
    char buf[64], **value = calloc(n, sizeof *value);
    /* check:FILE is read back each tick and must keep its first value (an event<N>
     * another program could re-program); write:FILE=VALUE is written each tick, in
     * its place among the reads. */
    long touch = 0;
    if (n > 0 && !strncmp(files[0], "touch:", 6)) touch = atol(files[0] + 6), files++, n--;
    if (open_ops(n, files, fds, check, value)) return 1;
    volatile unsigned char *lines = touch > 0 ? calloc(touch / 10 + 1, 4096) : NULL;
    if (touch > 0 && !lines) { perror("touch:"); return 1; }
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
        for (long k = 0; k < touch; k++) lines[(k / 10) * 4096 + (k % 10) * 384]++;
        fflush(stdout);
        next.tv_nsec += ms * 1000000L;
        while (next.tv_nsec >= 1000000000L) { next.tv_nsec -= 1000000000L; next.tv_sec++; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
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
