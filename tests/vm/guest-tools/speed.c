// SPDX-License-Identifier: BSD-3-Clause
/*
 * speed: a donor guest's own workload, timing itself, so that a benchmark
 * can tell what a donation (or a balloon, or host compaction) costs the
 * guest that gives the memory.
 *
 *   speed anon MIB
 *       Maps MIB MiB of anonymous memory in 4 KiB pages (MADV_NOHUGEPAGE,
 *       like memfill's, so that a donation moves them one by one), writes
 *       every page once; then one operation writes one word into each of
 *       16 random pages of it.
 *   speed cache FILE MIB
 *       Reads the first MIB MiB of FILE (a block device or a file) once, so
 *       that they are in the page cache; then one operation is a buffered
 *       pread() of one random 4 KiB block of them.
 *   speed now
 *       Prints CLOCK_BOOTTIME in microseconds (what the sample lines are
 *       stamped with; the host takes the offset to its own clock from it).
 *
 * The workloads print "READY" once set up, then every 100 ms a line
 *   S <boottime_us> <ops> <p99_ns> <max_ns>
 * (operations finished in the window that ends at boottime_us, their 99th
 * percentile and largest latency; a window ends at the first operation
 * that finishes past its 100 ms, so a stall of a second is one long window
 * with its ops/s low), until killed.  Latencies go into a log-linear
 * histogram (16 steps per power of two, so p99 is within 6%), not an array:
 * nothing is sorted inside the window being measured.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define WINDOW_NS 100000000ULL
#define SUB 16
#define NBUCKETS (SUB + 60 * SUB)
#define ANON_TOUCHES 16

static uint64_t hist[NBUCKETS];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static unsigned int bucket(uint64_t v)
{
	unsigned int e;

	if (v < SUB)
		return v;
	e = 63 - __builtin_clzll(v); /* >= 4 */
	return SUB + (e - 4) * SUB + ((v >> (e - 4)) & (SUB - 1));
}

/* the largest value that falls into bucket @b */
static uint64_t bucket_top(unsigned int b)
{
	unsigned int e, sub;

	if (b < SUB)
		return b;
	e = (b - SUB) / SUB + 4;
	sub = (b - SUB) % SUB;
	return (((uint64_t)SUB + sub + 1) << (e - 4)) - 1;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct work {
	volatile unsigned char *mem; /* anon */
	int fd;			     /* cache */
	unsigned long pages;
	uint64_t seed;
};

static void op_anon(struct work *w)
{
	int i;

	for (i = 0; i < ANON_TOUCHES; i++) {
		unsigned long p = xorshift(&w->seed) % w->pages;

		w->mem[p * PAGE + (w->seed >> 52)]++;
	}
}

static void op_cache(struct work *w)
{
	char buf[PAGE];
	unsigned long p = xorshift(&w->seed) % w->pages;

	if (pread(w->fd, buf, PAGE, p * PAGE) != (ssize_t)PAGE) {
		perror("pread");
		exit(1);
	}
}

static void run(struct work *w, void (*op)(struct work *))
{
	uint64_t end = now_ns() + WINDOW_NS, t0, t1, ops = 0, max = 0;

	printf("READY\n");
	fflush(stdout);
	for (;;) {
		t0 = now_ns();
		op(w);
		t1 = now_ns();
		hist[bucket(t1 - t0)]++;
		if (t1 - t0 > max)
			max = t1 - t0;
		ops++;
		if (t1 >= end) {
			uint64_t want = (ops * 99 + 99) / 100, seen = 0;
			unsigned int b;

			for (b = 0; b < NBUCKETS; b++) {
				seen += hist[b];
				if (seen >= want)
					break;
			}
			printf("S %llu %llu %llu %llu\n",
			       (unsigned long long)(t1 / 1000),
			       (unsigned long long)ops,
			       (unsigned long long)bucket_top(b),
			       (unsigned long long)max);
			fflush(stdout);
			memset(hist, 0, sizeof(hist));
			ops = max = 0;
			end = t1 + WINDOW_NS;
		}
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: speed anon MIB | speed cache FILE MIB | speed now\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct work w = { .fd = -1, .seed = 0x9e3779b97f4a7c15ULL ^ getpid() };
	unsigned long i;

	if (argc == 2 && !strcmp(argv[1], "now")) {
		printf("%llu\n", (unsigned long long)(now_ns() / 1000));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "anon")) {
		unsigned long bytes = strtoul(argv[2], NULL, 0) << 20;
		void *p;

		if (!bytes)
			usage();
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		madvise(p, bytes, MADV_NOHUGEPAGE);
		w.mem = p;
		w.pages = bytes / PAGE;
		for (i = 0; i < w.pages; i++)
			w.mem[i * PAGE] = 1;
		run(&w, op_anon);
	}
	if (argc == 4 && !strcmp(argv[1], "cache")) {
		char buf[1 << 16];
		unsigned long bytes = strtoul(argv[3], NULL, 0) << 20, off;

		if (!bytes)
			usage();
		w.fd = open(argv[2], O_RDONLY);
		if (w.fd < 0) {
			perror(argv[2]);
			return 1;
		}
		for (off = 0; off < bytes; off += sizeof(buf)) {
			if (pread(w.fd, buf, sizeof(buf), off) != (ssize_t)sizeof(buf)) {
				fprintf(stderr, "%s: shorter than %lu MiB\n", argv[2],
					bytes >> 20);
				return 1;
			}
		}
		w.pages = bytes / PAGE;
		run(&w, op_cache);
	}
	usage();
	return 2;
}
