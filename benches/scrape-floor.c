#define _GNU_SOURCE
/* The floor of a scrape: a minimal keep-alive HTTP server that, for every request,
 * preads the same files the exporter reads and prints one Prometheus text line per
 * value; and a client that times keep-alive scrapes of any server.
 *   scrape-floor serve PORT FILE...   serve /metrics on 127.0.0.1:PORT (0: any, said
 *                                     on stderr); each scrape does each FILE in
 *                                     order: a check:FILE is read and not printed (a
 *                                     value read back), a write:FILE=VALUE is written
 *                                     (a block stopped or started), any other FILE
 *                                     is read and printed
 *   scrape-floor client PORT N [MS]   N keep-alive GETs (MS milliseconds apart, else
 *                                     back to back); prints p50, p99, max (µs)
 * Built by benches/scrape.sh with cc -O2. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ops.h"

static int serve(int port, int n, char **files) {
    int *fds = calloc(n, sizeof *fds), *check = calloc(n, sizeof *check);
    char **value = calloc(n, sizeof *value);
    if (open_ops(n, files, fds, check, value)) return 1;
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (void *)&a, sizeof a) || listen(s, 64)) { perror("bind"); return 1; }
    /* With port 0, the one the kernel chose. */
    socklen_t alen = sizeof a;
    getsockname(s, (void *)&a, &alen);
    fprintf(stderr, "serving on port %d\n", ntohs(a.sin_port));
    static char body[1 << 20], head[256], req[8192], buf[64];
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        size_t have = 0;
        for (;;) {
            ssize_t r = read(c, req + have, sizeof req - have - 1);
            if (r <= 0) break;
            have += r;
            req[have] = 0;
            char *end;
            while ((end = strstr(req, "\r\n\r\n"))) {
                size_t len = 0;
                for (int i = 0; i < n; i++) {
                    if (value[i]) {
                        if (pwrite(fds[i], value[i], strlen(value[i]), 0) < 0) perror(files[i]);
                        continue;
                    }
                    ssize_t k = pread(fds[i], buf, sizeof buf - 1, 0);
                    buf[k > 0 ? k : 0] = 0;
                    if (check[i]) continue;
                    len += snprintf(body + len, sizeof body - len,
                                    "bfperf_value{file=\"%s\"} %llu\n", files[i],
                                    strtoull(buf, NULL, 0));
                }
                int h = snprintf(head, sizeof head,
                                 "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %zu\r\n\r\n", len);
                write(c, head, h);
                write(c, body, len);
                size_t used = end + 4 - req;
                memmove(req, req + used, have - used + 1);
                have -= used;
            }
        }
        close(c);
    }
}

static int cmp(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static int client(int port, int n, long gap_ms) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (void *)&a, sizeof a)) { perror("connect"); return 1; }
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const char *get = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/plain\r\n\r\n";
    long *us = calloc(n, sizeof *us);
    static char buf[1 << 20];
    for (int i = 0; i < n; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        write(s, get, strlen(get));
        size_t have = 0, want = 0;
        for (;;) {
            ssize_t r = read(s, buf + have, sizeof buf - have - 1);
            if (r <= 0) { fprintf(stderr, "closed\n"); return 1; }
            have += r;
            buf[have] = 0;
            char *end = strstr(buf, "\r\n\r\n");
            if (!end) continue;
            if (!want) {
                char *cl = strcasestr(buf, "Content-Length:");
                want = (end + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
            }
            if (have >= want) break;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        us[i] = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
        if (gap_ms > 0) {
            struct timespec gap = {gap_ms / 1000, gap_ms % 1000 * 1000000L};
            nanosleep(&gap, NULL);
        }
    }
    qsort(us, n, sizeof *us, cmp);
    printf("p50 %ld us, p99 %ld us, max %ld us\n", us[n / 2], us[n * 99 / 100], us[n - 1]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 3 && !strcmp(argv[1], "serve")) return serve(atoi(argv[2]), argc - 3, argv + 3);
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "client"))
        return client(atoi(argv[2]), atoi(argv[3]), argc == 5 ? atol(argv[4]) : 0);
    fprintf(stderr, "usage: scrape-floor serve PORT FILE... | client PORT N [MS]\n");
    return 2;
}
