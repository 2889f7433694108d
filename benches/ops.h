/* The file operations the floors do, as bfperf does them (benches/floor.c's sample,
 * benches/scrape-floor.c's serve): FILE is read, check:FILE is read back (not
 * printed), write:FILE=VALUE is written. Opens each once; 0, or 1 with the file
 * that failed said. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

static int open_ops(int n, char **files, int *fds, int *check, char **value) {
    for (int i = 0; i < n; i++) {
        check[i] = !strncmp(files[i], "check:", 6);
        if (check[i]) files[i] += 6;
        if (!strncmp(files[i], "write:", 6) && strchr(files[i], '=')) {
            files[i] += 6;
            value[i] = strchr(files[i], '=');
            *value[i]++ = 0;
        }
        fds[i] = open(files[i], value[i] ? O_WRONLY : O_RDONLY);
        if (fds[i] < 0) { perror(files[i]); return 1; }
    }
    return 0;
}
