// SPDX-License-Identifier: BSD-3-Clause
/*
 * pressure: push the guest into reclaim by touching anonymous memory.
 *
 *   pressure MIB [HOLD_SECONDS]
 *
 * Maps MIB MiB of anonymous memory and writes every page, 4 MiB at a time,
 * printing "progress N" every 32 MiB and "DONE touched=N" at the end; then
 * keeps the memory for HOLD_SECONDS (default 0) and exits 0.  The test
 * guest has no swap, so anonymous memory cannot be reclaimed: once free
 * memory runs out, the only way this completes without an OOM kill is the
 * hugeroom driver giving its held blocks back (shrinker, OOM notifier).
 * It also prints MemTotal and MemAvailable (from /proc/meminfo) at the
 * start and the end, so the log shows the holds coming back.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void meminfo(const char *when)
{
	char line[256];
	long total = -1, avail = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "MemTotal: %ld kB", &total);
		sscanf(line, "MemAvailable: %ld kB", &avail);
	}
	fclose(f);
	printf("%s MemTotal=%ld MemAvailable=%ld\n", when, total, avail);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	unsigned long mib, hold = 0, i, pages;
	unsigned char *mem;

	if (argc < 2) {
		fprintf(stderr, "usage: pressure MIB [HOLD_SECONDS]\n");
		return 1;
	}
	mib = strtoul(argv[1], NULL, 0);
	if (argc > 2)
		hold = strtoul(argv[2], NULL, 0);
	pages = mib * 256;
	meminfo("start");
	mem = mmap(NULL, pages * 4096UL, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	madvise(mem, pages * 4096UL, MADV_NOHUGEPAGE);
	for (i = 0; i < pages; i++) {
		mem[i * 4096UL] = (unsigned char)i;
		mem[i * 4096UL + 4095] = (unsigned char)(i >> 8);
		if (i && i % (32 * 256) == 0) {
			printf("progress %lu\n", i / 256);
			fflush(stdout);
		}
	}
	printf("DONE touched=%lu\n", mib);
	meminfo("end");
	if (hold)
		sleep(hold);
	return 0;
}
