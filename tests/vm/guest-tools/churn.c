// SPDX-License-Identifier: BSD-3-Clause
/*
 * churn: a multi-threaded fault-and-free workload, the page allocator's
 * per-CPU lists under load.
 *
 *   churn THREADS SECONDS ROUND_PAGES RESIDENT_MIB
 *
 * First (RESIDENT_MIB > 0) maps RESIDENT_MIB MiB, writes every page, and frees every other
 * 16 KiB of it (MADV_DONTNEED), so that what stays resident is spread over
 * many 2 MiB blocks.  Then THREADS threads, each pinned to a CPU in turn,
 * repeat for SECONDS: write each page of a private ROUND_PAGES-page region
 * (one page fault, one page allocation each, timed one by one), then free
 * the region at once (MADV_DONTNEED: the pages go to the freeing CPU's
 * per-CPU lists, or the buddy allocator past `high`).  All regions are
 * 4 KiB pages (MADV_NOHUGEPAGE).
 *
 * Prints one line
 *   RESULT threads=T seconds=S pages=P pages_per_s=X fault_p50_ns=A
 *   fault_p99_ns=B free_ns_per_page=C
 * and "READY", then keeps the resident memory until killed, so that what
 * follows (reports, an evacuation) sees the same guest.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define MAX_SAMPLES (1UL << 22)

struct worker {
	pthread_t thread;
	int cpu;
	unsigned long round_pages;
	double seconds;
	unsigned long pages;
	unsigned long nr_samples;
	unsigned int *samples;	/* fault latency, ns, a reservoir */
	unsigned long long free_ns;
};

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void *map_4k(unsigned long bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	madvise(p, bytes, MADV_NOHUGEPAGE);
	return p;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	unsigned long bytes = w->round_pages * PAGE, i, seen = 0;
	unsigned long long end, t0, t1;
	unsigned int seed = (unsigned int)w->cpu * 7919u + 1;
	volatile unsigned char *mem = map_4k(bytes);
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	end = now_ns() + (unsigned long long)(w->seconds * 1e9);
	while (now_ns() < end) {
		for (i = 0; i < w->round_pages; i++) {
			unsigned long slot;

			t0 = now_ns();
			mem[i * PAGE] = (unsigned char)i;
			t1 = now_ns();
			/* reservoir sampling keeps the distribution fair */
			slot = seen < MAX_SAMPLES ? seen :
			       (unsigned long)rand_r(&seed) % (seen + 1);
			if (slot < MAX_SAMPLES)
				w->samples[slot] = (unsigned int)(t1 - t0);
			seen++;
		}
		t0 = now_ns();
		madvise((void *)mem, bytes, MADV_DONTNEED);
		w->free_ns += now_ns() - t0;
		w->pages += w->round_pages;
	}
	w->nr_samples = seen < MAX_SAMPLES ? seen : MAX_SAMPLES;
	munmap((void *)mem, bytes);
	return NULL;
}

static int cmp_uint(const void *a, const void *b)
{
	unsigned int x = *(const unsigned int *)a, y = *(const unsigned int *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	unsigned long threads, round_pages, resident_mib, i, n = 0, pages = 0;
	unsigned long long free_ns = 0, t0, t1;
	unsigned char *resident;
	unsigned int *all;
	struct worker *w;
	double seconds;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	if (argc != 5) {
		fprintf(stderr, "usage: churn THREADS SECONDS ROUND_PAGES RESIDENT_MIB\n");
		return 1;
	}
	threads = strtoul(argv[1], NULL, 0);
	seconds = strtod(argv[2], NULL);
	round_pages = strtoul(argv[3], NULL, 0);
	resident_mib = strtoul(argv[4], NULL, 0);
	if (!threads || seconds <= 0 || !round_pages || ncpu < 1) {
		fprintf(stderr, "churn: bad arguments\n");
		return 1;
	}

	if (resident_mib) {
		resident = map_4k(resident_mib << 20);
		memset(resident, 1, resident_mib << 20);
		for (i = 0; i < (resident_mib << 20); i += 8 * PAGE)
			madvise(resident + i + 4 * PAGE, 4 * PAGE, MADV_DONTNEED);
	}

	w = calloc(threads, sizeof(*w));
	if (!w)
		return 1;
	t0 = now_ns();
	for (i = 0; i < threads; i++) {
		w[i].cpu = (int)(i % (unsigned long)ncpu);
		w[i].round_pages = round_pages;
		w[i].seconds = seconds;
		w[i].samples = malloc(MAX_SAMPLES * sizeof(unsigned int));
		if (!w[i].samples ||
		    pthread_create(&w[i].thread, NULL, work, &w[i]))
			return 1;
	}
	for (i = 0; i < threads; i++) {
		pthread_join(w[i].thread, NULL);
		n += w[i].nr_samples;
		pages += w[i].pages;
		free_ns += w[i].free_ns;
	}
	t1 = now_ns();
	all = malloc((n ? n : 1) * sizeof(unsigned int));
	if (!all)
		return 1;
	for (n = 0, i = 0; i < threads; i++) {
		memcpy(all + n, w[i].samples, w[i].nr_samples * sizeof(unsigned int));
		n += w[i].nr_samples;
		free(w[i].samples);
	}
	qsort(all, n, sizeof(unsigned int), cmp_uint);
	printf("RESULT threads=%lu seconds=%.2f pages=%lu pages_per_s=%.0f "
	       "fault_p50_ns=%u fault_p99_ns=%u free_ns_per_page=%.1f\n",
	       threads, (t1 - t0) / 1e9, pages, pages / ((t1 - t0) / 1e9),
	       n ? all[n / 2] : 0, n ? all[n * 99 / 100] : 0,
	       pages ? (double)free_ns / pages : 0.0);
	printf("READY\n");
	fflush(stdout);
	for (;;)
		pause();
}
