// SPDX-License-Identifier: BSD-3-Clause
/*
 * memfill: fill guest memory with a checksummed pattern and verify it later.
 *
 * Runs in the busybox test guest (built static by build.sh).
 *
 *   memfill serve DIR MIB [CHUNK_PAGES] [SEED] [-H] [-f PERMILLE] [-R]
 *       Touches MIB MiB of anonymous memory (MADV_NOHUGEPAGE unless -H),
 *       writing into every 4 KiB page a pattern derived from (seed, page
 *       index) whose last word is a checksum of the rest.  With CHUNK_PAGES
 *       > 0 it then frees chunks of that many pages (MADV_DONTNEED),
 *       leaving holes of free memory spread over the guest's pageblocks;
 *       only the kept pages are verified.  -f sets the fraction of chunks
 *       freed, in thousandths (default 500: every other chunk); the freed
 *       chunks are spread evenly (striped) or, with -R, chosen at random
 *       from the seed.  It creates
 *       the fifos DIR/in and DIR/out, prints "READY pages=N kept=K" and
 *       serves commands (one a line on DIR/in, answer on DIR/out):
 *         verify   -> "VERIFY kept=K bad=B first_bad=I" (I = -1 if none)
 *         quit     -> "BYE", then exits
 *   memfill ctl DIR CMD
 *       Sends CMD to a serving memfill, prints its answer, exits 0 unless
 *       the answer is a VERIFY with bad > 0 (exit 2).
 *
 * Page layout (512 64-bit words): w[0] magic, w[1] page index, w[2] seed,
 * w[3..510] xorshift stream seeded by (seed, index), w[511] checksum of
 * w[0..510].  A page the host discarded under the guest's feet reads back
 * as zeros; a page migrated wrongly reads back as another page's content:
 * both fail the index or checksum check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096UL
#define WORDS (PAGE / 8)
#define MAGIC 0x48554745524f4f4dULL /* "HUGEROOM" */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static void fill_page(uint64_t *w, uint64_t idx, uint64_t seed)
{
	uint64_t x = mix(seed ^ (idx * 0x9e3779b97f4a7c15ULL)) | 1, sum = 0;
	unsigned int i;

	w[0] = MAGIC;
	w[1] = idx;
	w[2] = seed;
	for (i = 3; i < WORDS - 1; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		w[i] = x;
	}
	for (i = 0; i < WORDS - 1; i++)
		sum = sum * 31 + w[i];
	w[WORDS - 1] = sum;
}

static int check_page(const uint64_t *w, uint64_t idx, uint64_t seed)
{
	uint64_t sum = 0;
	unsigned int i;

	if (w[0] != MAGIC || w[1] != idx || w[2] != seed)
		return 0;
	for (i = 0; i < WORDS - 1; i++)
		sum = sum * 31 + w[i];
	return sum == w[WORDS - 1];
}

/* which chunks are freed: -f (thousandths) and -R */
static unsigned long free_permille = 500;
static int random_holes;
static uint64_t hole_seed;

static int kept(uint64_t idx, unsigned long chunk)
{
	uint64_t k;

	if (chunk == 0)
		return 1;
	k = idx / chunk;
	if (random_holes)
		return mix(hole_seed ^ (k * 0xd6e8feb86659fd93ULL)) % 1000 >= free_permille;
	/* striped: chunk k is freed when k * f / 1000 steps up at k + 1 */
	return (k + 1) * free_permille / 1000 == k * free_permille / 1000;
}

static int ctl(const char *dir, const char *cmd)
{
	char path[512], buf[4096];
	ssize_t n;
	int fd, bad = 0;

	snprintf(path, sizeof(path), "%s/in", dir);
	fd = open(path, O_WRONLY);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	snprintf(buf, sizeof(buf), "%s\n", cmd);
	if (write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf)) {
		perror("write");
		return 1;
	}
	close(fd);
	snprintf(path, sizeof(path), "%s/out", dir);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	while ((n = read(fd, buf, sizeof(buf) - 1)) > 0) {
		char *p;

		buf[n] = 0;
		fputs(buf, stdout);
		p = strstr(buf, " bad=");
		if (p && strtoul(p + 5, NULL, 10) > 0)
			bad = 1;
	}
	close(fd);
	return bad ? 2 : 0;
}

int main(int argc, char **argv)
{
	unsigned long mib, chunk = 0, i, npages, nkept = 0;
	uint64_t seed = 1;
	int nohuge = 1, a;
	char path[512], line[256];
	unsigned char *mem;
	FILE *in;

	if (argc >= 4 && !strcmp(argv[1], "ctl"))
		return ctl(argv[2], argv[3]);
	if (argc < 4 || strcmp(argv[1], "serve")) {
		fprintf(stderr, "usage: memfill serve DIR MIB [CHUNK_PAGES] [SEED] [-H] "
				"[-f PERMILLE] [-R]\n"
				"       memfill ctl DIR CMD\n");
		return 1;
	}
	mib = strtoul(argv[3], NULL, 0);
	for (a = 4; a < argc; a++) {
		if (!strcmp(argv[a], "-H"))
			nohuge = 0;
		else if (!strcmp(argv[a], "-R"))
			random_holes = 1;
		else if (!strcmp(argv[a], "-f") && a + 1 < argc)
			free_permille = strtoul(argv[++a], NULL, 0);
		else if (a == 4)
			chunk = strtoul(argv[a], NULL, 0);
		else
			seed = strtoull(argv[a], NULL, 0);
	}
	if (free_permille > 1000) {
		fprintf(stderr, "memfill: -f takes 0-1000\n");
		return 1;
	}
	hole_seed = mix(seed + 0x5eed);
	npages = mib * 256;
	mem = mmap(NULL, npages * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (nohuge && madvise(mem, npages * PAGE, MADV_NOHUGEPAGE))
		perror("madvise(MADV_NOHUGEPAGE)");
	for (i = 0; i < npages; i++)
		fill_page((uint64_t *)(mem + i * PAGE), i, seed);
	/* Free every other chunk: holes in the guest's pageblocks. */
	for (i = 0; i < npages; i += chunk ? chunk : npages) {
		unsigned long n = chunk ? chunk : npages;

		if (i + n > npages)
			n = npages - i;
		if (!kept(i, chunk) && madvise(mem + i * PAGE, n * PAGE, MADV_DONTNEED)) {
			perror("madvise(MADV_DONTNEED)");
			return 1;
		}
	}
	for (i = 0; i < npages; i++)
		nkept += kept(i, chunk);

	snprintf(path, sizeof(path), "%s/in", argv[2]);
	unlink(path);
	if (mkfifo(path, 0600)) {
		perror(path);
		return 1;
	}
	in = fopen(path, "r+");		/* r+: never sees EOF between clients */
	if (!in) {
		perror(path);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/out", argv[2]);
	unlink(path);
	if (mkfifo(path, 0600)) {
		perror(path);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	printf("READY pages=%lu kept=%lu pid=%d\n", npages, nkept, getpid());
	fflush(stdout);

	while (fgets(line, sizeof(line), in)) {
		char out[512];
		FILE *o;
		int quit = 0;

		line[strcspn(line, "\r\n")] = 0;
		if (!strcmp(line, "verify")) {
			unsigned long bad = 0;
			long first = -1;

			for (i = 0; i < npages; i++) {
				if (!kept(i, chunk))
					continue;
				if (!check_page((uint64_t *)(mem + i * PAGE), i, seed)) {
					if (first < 0)
						first = (long)i;
					bad++;
				}
			}
			snprintf(out, sizeof(out), "VERIFY kept=%lu bad=%lu first_bad=%ld\n",
				 nkept, bad, first);
		} else if (!strcmp(line, "quit")) {
			snprintf(out, sizeof(out), "BYE\n");
			quit = 1;
		} else {
			snprintf(out, sizeof(out), "ERROR unknown command %s\n", line);
		}
		o = fopen(path, "w");
		if (o) {
			fputs(out, o);
			fclose(o);
		}
		if (quit)
			return 0;
	}
	return 0;
}
