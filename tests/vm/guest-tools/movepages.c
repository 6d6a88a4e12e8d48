// SPDX-License-Identifier: BSD-3-Clause
/*
 * movepages: what the kernel's own page migration costs per page in this
 * guest, the floor an evacuation's time per migrated page is compared with.
 *
 *   movepages PAGES FROM TO
 *
 * Maps PAGES anonymous 4 KiB pages (MADV_NOHUGEPAGE), writes each, moves
 * them all to node FROM (untimed), then times one move_pages(2) of all of
 * them to node TO and one back to FROM, and prints
 *   MOVE pages=N moved=M us=T ns_per_page=X
 *   BACK pages=N moved=M us=T ns_per_page=X
 * (moved: pages whose status says they are on the target node afterwards;
 * ns_per_page is us over moved).  move_pages skips a page already on the
 * target node, so the guest needs two NUMA nodes.  Exit 1 when the pages
 * could not be put on FROM.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define MPOL_MF_MOVE (1 << 1)

static unsigned long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
}

static unsigned long move(unsigned long n, void **pages, int *nodes, int *status,
			  int to, unsigned long long *us)
{
	unsigned long i, moved = 0;
	unsigned long long t0;
	long rc;

	for (i = 0; i < n; i++)
		nodes[i] = to;
	t0 = now_us();
	rc = syscall(SYS_move_pages, 0, n, pages, nodes, status, MPOL_MF_MOVE);
	*us = now_us() - t0;
	if (rc < 0) {
		perror("move_pages");
		exit(1);
	}
	for (i = 0; i < n; i++)
		moved += status[i] == to;
	return moved;
}

int main(int argc, char **argv)
{
	unsigned long n, i, moved;
	unsigned long long us;
	int from, to, *nodes, *status;
	void **pages;
	char *mem;

	if (argc != 4) {
		fprintf(stderr, "usage: movepages PAGES FROM TO\n");
		return 2;
	}
	n = strtoul(argv[1], NULL, 0);
	from = atoi(argv[2]);
	to = atoi(argv[3]);
	mem = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pages = calloc(n, sizeof(*pages));
	nodes = calloc(n, sizeof(*nodes));
	status = calloc(n, sizeof(*status));
	if (mem == MAP_FAILED || !pages || !nodes || !status) {
		perror("movepages: memory");
		return 1;
	}
	madvise(mem, n * PAGE, MADV_NOHUGEPAGE);
	for (i = 0; i < n; i++) {
		mem[i * PAGE] = (char)i;
		pages[i] = mem + i * PAGE;
	}
	move(n, pages, nodes, status, from, &us);
	if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) < 0) {
		perror("move_pages (query)");
		return 1;
	}
	for (i = 0, moved = 0; i < n; i++)
		moved += status[i] == from;
	if (moved != n) {
		fprintf(stderr, "movepages: only %lu of %lu pages on node %d\n", moved, n,
			from);
		return 1;
	}
	moved = move(n, pages, nodes, status, to, &us);
	printf("MOVE pages=%lu moved=%lu us=%llu ns_per_page=%llu\n", n, moved, us,
	       moved ? us * 1000 / moved : 0);
	moved = move(n, pages, nodes, status, from, &us);
	printf("BACK pages=%lu moved=%lu us=%llu ns_per_page=%llu\n", n, moved, us,
	       moved ? us * 1000 / moved : 0);
	return 0;
}
