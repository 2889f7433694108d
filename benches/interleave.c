/* Processor time of short programs, run in turn so that each meets the machine as
 * the others do:
 *   interleave RUNS -- COMMAND ARG... [-- COMMAND ARG...]...
 * runs the first command, then the second, ... then the first again, RUNS times
 * each, its output to /dev/null, and prints for each command, on a line of its own
 * in the order given, the median, first and third quartiles of its processor time
 * per run in milliseconds (user + system, from wait4's rusage, which the kernel
 * keeps to the nanosecond and rounds to the microsecond). A command that fails, or
 * is killed, stops it with status 1.
 * On a shared machine the load changes within a second: run one after the other,
 * 200 runs of one program then 200 of another meet different machines. Taken in
 * turn, run by run, both meet the same one; the median leaves out the runs a
 * burst of the machine's own load struck.
 * Built by benches/floor.sh with cc -O2. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_COMMANDS 8

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long runs = argc > 2 ? strtol(argv[1], NULL, 10) : 0;
    if (runs < 1 || runs > 100000 || strcmp(argv[2], "--")) {
        fprintf(stderr, "usage: interleave RUNS -- COMMAND ARG... [-- COMMAND ARG...]...\n");
        return 2;
    }
    char **commands[MAX_COMMANDS];
    int n = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--")) continue;
        argv[i] = NULL; /* ends the command before it */
        if (i + 1 == argc || !strcmp(argv[i + 1], "--") || n == MAX_COMMANDS) {
            fprintf(stderr, "interleave: an empty command, or more than %d\n", MAX_COMMANDS);
            return 2;
        }
        commands[n++] = &argv[i + 1];
    }
    double *ms = calloc((size_t)n * runs, sizeof *ms);
    int null = open("/dev/null", O_WRONLY);
    if (!ms || null < 0) { perror("interleave"); return 1; }
    for (long r = 0; r < runs; r++) {
        for (int k = 0; k < n; k++) {
            pid_t pid = fork();
            if (pid < 0) { perror("fork"); return 1; }
            if (pid == 0) {
                dup2(null, 1);
                dup2(null, 2);
                execvp(commands[k][0], commands[k]);
                _exit(127);
            }
            int status;
            struct rusage ru;
            if (wait4(pid, &status, 0, &ru) != pid) { perror("wait4"); return 1; }
            if (!WIFEXITED(status) || WEXITSTATUS(status)) {
                fprintf(stderr, "interleave: %s failed (status %d)\n", commands[k][0], status);
                return 1;
            }
            ms[k * runs + r] = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                               (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
        }
    }
    for (int k = 0; k < n; k++) {
        double *t = ms + k * runs;
        qsort(t, runs, sizeof *t, by_value);
        printf("%.3f %.3f %.3f\n", t[runs / 2], t[runs / 4], t[runs * 3 / 4]);
    }
    return 0;
}
