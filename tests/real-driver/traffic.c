/*
 * A register-level traffic helper for the real-driver suite: inside the guest it
 * advances the counter registers the mlxbf-pmc driver reads, through /dev/mem, at
 * known rates, so that bfperf's counts on the real driver can be checked against a
 * known truth.
 *
 *   traffic crspace BASE COUNTERS RATE    (BlueField-3 llt, llt_miss, mss)
 *   traffic l3 BASE COUNTERS RATE         (BlueField-1/2 l3cachehalf)
 *   traffic register BASE OFFSET RATE     (a free-running 64-bit register: pcie, ecc)
 *
 * Counter i of a block counts RATE * (i + 1) per second. Like the hardware, crspace
 * and L3 counters count only while the block is enabled, and its clear bit (crspace
 * PERFMON_CTL CLR, L3 PERF_CNT_CFG RST) zeroes them; register blocks always count.
 * Register offsets are the driver's (MLXBF_PMC_CRSPACE_PERFMON_*, MLXBF_PMC_L3C_*).
 * Runs until killed; polls every 200 microseconds.
 *
 * A poll cannot see the L3 reset: the driver writes PERF_CNT_CFG = RST and at once
 * PERF_CNT_CFG = EN. So the helper marks the register with a bit the driver neither
 * reads nor keeps (bit 31; `enable` shows only EN): a register without the mark was
 * written by the driver since the last poll, and a write that enables was preceded by
 * the reset (every path that sets EN writes RST first). The helper's own writes are
 * compare-and-swap, so they never undo one of the driver's.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CRSPACE_EN (1u << 30)
#define CRSPACE_CLR (1u << 28)
#define L3_EN 1u
#define L3_RST 2u
#define L3_MARK (1u << 31)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static volatile uint8_t *map(uint64_t base, size_t size)
{
	int fd = open("/dev/mem", O_RDWR | O_SYNC);
	if (fd < 0) {
		perror("traffic: /dev/mem");
		exit(1);
	}
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, base);
	if (p == MAP_FAILED) {
		perror("traffic: mmap");
		exit(1);
	}
	return p;
}

#define R32(p, off) (*(volatile uint32_t *)((p) + (off)))
#define R64(p, off) (*(volatile uint64_t *)((p) + (off)))

/* Adds `per_s * dt` to the fraction carried in *acc; returns the whole events to count. */
static uint64_t advance(double *acc, double per_s, double dt)
{
	*acc += per_s * dt;
	uint64_t whole = (uint64_t)*acc;
	*acc -= whole;
	return whole;
}

/* Replaces the word at p + off with `new` if it still holds `old`. */
static int swap32(volatile uint8_t *p, unsigned off, uint32_t old, uint32_t new)
{
	return __atomic_compare_exchange_n((volatile uint32_t *)(p + off), &old, new, 0,
					   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: traffic crspace|l3 BASE COUNTERS RATE | register BASE OFFSET RATE\n");
		return 2;
	}
	const char *kind = argv[1];
	uint64_t base = strtoull(argv[2], NULL, 0);
	volatile uint8_t *p = map(base, 0x10000);
	unsigned counters, offset = 0;
	double rate, acc[64] = { 0 };
	if (argc < 5) {
		fprintf(stderr, "traffic: a rate is missing\n");
		return 2;
	}
	if (!strcmp(kind, "register")) {
		offset = strtoul(argv[3], NULL, 0);
		counters = 1;
	} else {
		counters = strtoul(argv[3], NULL, 0);
	}
	rate = strtod(argv[4], NULL);
	if (counters > 64)
		counters = 64;
	double last = now();
	int started = 0;
	for (;;) {
		usleep(200);
		double t = now(), dt = t - last;
		last = t;
		if (!strcmp(kind, "crspace")) {
			unsigned ctl = counters * 2, val0 = ctl + 0xc;
			uint32_t word = R32(p, ctl);
			if (word & CRSPACE_CLR) {
				if (!swap32(p, ctl, word, word & ~CRSPACE_CLR))
					continue;
				for (unsigned i = 0; i < counters; i++) {
					R32(p, val0 + 4 * i) = 0;
					acc[i] = 0;
				}
			}
			if (!(word & CRSPACE_EN))
				continue;
			for (unsigned i = 0; i < counters; i++)
				R32(p, val0 + 4 * i) += (uint32_t)advance(&acc[i], rate * (i + 1), dt);
		} else if (!strcmp(kind, "l3")) {
			uint32_t cfg = R32(p, 0);
			if (!(cfg & L3_MARK)) {
				uint32_t marked = (cfg & ~L3_RST) | L3_MARK;
				if (!swap32(p, 0, cfg, marked))
					continue;
				/* The first poll only marks: nothing was written yet. */
				if (started && (cfg & (L3_RST | L3_EN))) {
					for (unsigned i = 0; i < counters; i++) {
						R32(p, 0x40 + 4 * i) = 0;
						R32(p, 0x60 + 4 * i) = 0;
						acc[i] = 0;
					}
				}
				cfg = marked;
			}
			started = 1;
			if (!(cfg & L3_EN))
				continue;
			for (unsigned i = 0; i < counters; i++) {
				uint64_t v = ((uint64_t)(R32(p, 0x60 + 4 * i) & 0x1ffffff) << 32 |
					      R32(p, 0x40 + 4 * i)) +
					     advance(&acc[i], rate * (i + 1), dt);
				R32(p, 0x40 + 4 * i) = (uint32_t)v;
				R32(p, 0x60 + 4 * i) = (uint32_t)(v >> 32) & 0x1ffffff;
			}
		} else {
			R64(p, offset) += advance(&acc[0], rate, dt);
		}
	}
}
