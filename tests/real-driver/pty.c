/*
 * A terminal for `bfperf top` in the real-driver guest, which has none (its console is
 * a serial line busybox does not hand to a child as a pty).
 *
 *   pty SECONDS COLS ROWS CMD [ARG...]
 *
 * Runs CMD as the session leader of a new pseudo-terminal of COLS x ROWS, copies
 * what it draws to standard output for SECONDS, then types `q` and waits (10 s at
 * most) for it to end. Exits with CMD's status, or 124 if it had to be killed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Copies the master's output to stdout until `until`; 0 when the child hung up. */
static int copy(int master, double until)
{
	char buf[4096];
	while (now() < until) {
		struct pollfd p = { .fd = master, .events = POLLIN };
		if (poll(&p, 1, 50) <= 0)
			continue;
		ssize_t n = read(master, buf, sizeof buf);
		if (n <= 0)
			return 0;
		if (write(1, buf, n) != n)
			return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: pty SECONDS COLS ROWS CMD [ARG...]\n");
		return 2;
	}
	double seconds = strtod(argv[1], NULL);
	struct winsize size = { .ws_col = atoi(argv[2]), .ws_row = atoi(argv[3]) };
	int master = posix_openpt(O_RDWR | O_NOCTTY);
	if (master < 0 || grantpt(master) || unlockpt(master)) {
		perror("pty: posix_openpt");
		return 1;
	}
	char *name = ptsname(master);
	pid_t child = fork();
	if (child == 0) {
		setsid();
		int slave = open(name, O_RDWR);
		if (slave < 0) {
			perror("pty: the slave");
			_exit(1);
		}
		ioctl(slave, TIOCSCTTY, 0);
		ioctl(slave, TIOCSWINSZ, &size);
		dup2(slave, 0), dup2(slave, 1), dup2(slave, 2);
		close(master), close(slave);
		execvp(argv[4], argv + 4);
		perror("pty: exec");
		_exit(127);
	}
	copy(master, now() + seconds);
	if (write(master, "q", 1) != 1)
		perror("pty: typing q");
	double deadline = now() + 10;
	int status;
	while (waitpid(child, &status, WNOHANG) == 0) {
		if (now() > deadline) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			return 124;
		}
		copy(master, now() + 0.1);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
