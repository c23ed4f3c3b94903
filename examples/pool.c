/*
 * pool: a server-shaped program with an allocator of its own, reporting it
 * to pullprof with the pool API (docs/api.md, "A host's own allocators").
 *
 * Its memory comes from arenas: bump-pointer allocators that take chunks
 * from malloc (arena_grow) and hand out pieces of them (arena_alloc), as
 * nginx's pools, APR's pools or PostgreSQL's memory contexts do. Each
 * request gets an arena of its own ("request": the request's headers and
 * its reply), destroyed when the request ends, and keeps a session record
 * in a long-lived arena ("sessions"), which gives records back one by one
 * (arena_free) and can be reset as a whole.
 *
 * Without the three pullprof_heap_* calls, the heap profile would show
 * only the chunks, all under arena_grow. With them, it shows the code that
 * used the memory: parse_request, build_reply and save_session, each
 * sample labelled with its pool (`go tool pprof -tags`).
 *
 * Usage: pool [--no-report]
 * The agent listens on PULLPROF_LISTEN (default 127.0.0.1:6060); the
 * program prints "ready PORT" and reads commands on stdin, one a line, each
 * answered with one line:
 *   run N      handle N requests
 *   expire K   free the K oldest session records (one by one)
 *   reset      reset the sessions arena (every record at once)
 *   truth      bytes allocated and still in use at each site, as the
 *              program counted them: "truth SITE ALLOC INUSE ..."
 *   bad        calls the API must shrug off (see bad_calls)
 *   threads T N  T threads at once, each with arenas of its own, N
 *              requests each (nothing they allocate outlives them)
 *   quit
 * --no-report leaves the pool API out: compare the two profiles.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pullprof.h>

static int report = 1;

/* ---- the arena ----------------------------------------------------------- */

struct chunk {
	struct chunk *next;
	size_t used, cap;
	_Alignas(16) unsigned char data[];
};

struct arena {
	const char *name;  /* the pool label of its blocks */
	size_t chunk_size; /* what it takes from malloc at a time */
	struct chunk *head;
};

/* The growth function: the one malloc'ing, which is all a heap profile
 * made by interposing malloc can see. */
static __attribute__((noinline)) struct chunk *arena_grow(struct arena *a,
                                                          size_t need)
{
	size_t cap = need > a->chunk_size ? need : a->chunk_size;
	struct chunk *c = malloc(sizeof *c + cap);
	if (!c)
		abort();
	c->used = 0;
	c->cap = cap;
	c->next = a->head;
	a->head = c;
	return c;
}

/* A piece of the current chunk. Reported with the size handed out: the
 * sample's stack starts here, so its callers are the code that asked. */
static __attribute__((noinline)) void *arena_alloc(struct arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	struct chunk *c = a->head;
	if (!c || c->cap - c->used < n)
		c = arena_grow(a, n);
	void *p = c->data + c->used;
	c->used += n;
	if (report)
		pullprof_heap_alloc(p, n, a->name);
	return p;
}

/* A block given back. This arena reuses the memory only at its reset. */
static void arena_free(struct arena *a, void *p)
{
	(void)a;
	if (report)
		pullprof_heap_free(p);
}

/* Every block at once, the chunks back to malloc: one release per chunk,
 * before the memory goes away (nothing is counted per block). */
static void arena_reset(struct arena *a)
{
	while (a->head) {
		struct chunk *c = a->head;
		a->head = c->next;
		if (report)
			pullprof_heap_release(c->data, c->used);
		free(c);
	}
}

/* ---- the program --------------------------------------------------------- */

/* What the program itself counts, per site: bytes handed out, bytes in
 * use. The profile must tell the same. */
enum { PARSE, REPLY, SESSION, SITES };
static const char *const site_names[SITES] = {"parse_request", "build_reply",
                                              "save_session"};
static uint64_t allocated[SITES], inuse[SITES];

static void count(int site, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	allocated[site] += n;
	inuse[site] += n;
}

static struct arena sessions = {"sessions", 1 << 20, NULL};

/* The session records, oldest first, for expire. */
static struct record {
	void *p;
	size_t n;
} * records;
static size_t nrecords, first_record, cap_records;

static uint32_t rng = 2463534242u;

static uint32_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

/* Eight headers of 64..191 bytes. */
static __attribute__((noinline)) void parse_request(struct arena *req)
{
	for (int i = 0; i < 8; i++) {
		size_t n = 64 + next_random() % 128;
		memset(arena_alloc(req, n), 'h', n);
		count(PARSE, n);
	}
}

static __attribute__((noinline)) void build_reply(struct arena *req)
{
	size_t n = 1024 + next_random() % 2048;
	memset(arena_alloc(req, n), 'r', n);
	count(REPLY, n);
}

/* The program's own index of the records (malloc'ed: not pool memory). */
static __attribute__((noinline)) void keep_record(void *p, size_t n)
{
	if (nrecords == cap_records) {
		cap_records = cap_records ? cap_records * 2 : 1024;
		records = realloc(records, cap_records * sizeof *records);
		if (!records)
			abort();
	}
	records[nrecords++] = (struct record){p, (n + 15) & ~(size_t)15};
}

static __attribute__((noinline)) void save_session(void)
{
	size_t n = 256 + next_random() % 512;
	void *p = arena_alloc(&sessions, n);
	memset(p, 's', n);
	count(SESSION, n);
	keep_record(p, n);
}

static __attribute__((noinline)) void handle_request(void)
{
	struct arena req = {"request", 16 << 10, NULL};
	parse_request(&req);
	build_reply(&req);
	save_session();
	/* The request's pool is destroyed: its blocks are no longer in use,
	 * and stay in what was allocated. */
	arena_reset(&req);
	inuse[PARSE] = inuse[REPLY] = 0;
}

static void expire(size_t k)
{
	for (; k && first_record < nrecords; k--, first_record++) {
		struct record *r = &records[first_record];
		arena_free(&sessions, r->p);
		inuse[SESSION] -= r->n;
	}
}

static void reset_sessions(void)
{
	arena_reset(&sessions);
	nrecords = first_record = 0;
	inuse[SESSION] = 0;
}

/* What the API takes without harm: each is ignored, or counted as what it
 * is, and nothing is left behind (/status's heap.live_sampled comes back
 * to where it was). */
static void bad_calls(void)
{
	static unsigned char buf[1 << 20];
	struct arena junk = {"junk", 64 << 10, NULL};

	pullprof_heap_free(buf + 4096); /* never reported */
	pullprof_heap_free(NULL);       /* NULL */
	pullprof_heap_alloc(NULL, 4096, "junk");
	pullprof_heap_release(NULL, 4096);
	pullprof_heap_release(buf, 0);              /* an empty range */
	pullprof_heap_release(buf, sizeof buf);     /* nothing in it */
	pullprof_heap_alloc(buf, SIZE_MAX, "junk"); /* no block is that big */
	for (int i = 0; i < 4096; i++)
		pullprof_heap_alloc(buf + i, 0, "junk"); /* size 0 */
	/* Blocks freed twice; blocks of a name too long for a label. */
	char name[400];
	memset(name, 'n', sizeof name - 1);
	name[sizeof name - 1] = 0;
	for (int i = 0; i < 4096; i++) {
		void *p = arena_alloc(&junk, 1024);
		pullprof_heap_alloc(p, 1024, name); /* reported again */
		pullprof_heap_free(p);
		pullprof_heap_free(p);
	}
	/* A release of a range past the end of the address space. */
	pullprof_heap_release((void *)(UINTPTR_MAX - 4095), 1 << 20);
	arena_reset(&junk);
}

/* A worker of "threads": requests whose blocks are freed one by one or
 * released with their arena, on many threads at once. */
static void *worker(void *arg)
{
	unsigned long n = (unsigned long)(uintptr_t)arg;
	struct arena kept = {"kept", 64 << 10, NULL};
	for (unsigned long i = 0; i < n; i++) {
		struct arena req = {"request", 16 << 10, NULL};
		for (int k = 0; k < 8; k++)
			arena_alloc(&req,
			            64 + (i * 8 + (unsigned long)k) % 512);
		arena_free(&kept, arena_alloc(&kept, 256 + i % 256));
		arena_reset(&req);
	}
	arena_reset(&kept);
	return NULL;
}

static int run_threads(unsigned t, unsigned long n)
{
	pthread_t th[64];
	if (t < 1 || t > 64)
		return -1;
	for (unsigned i = 0; i < t; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)n))
			return -1;
	for (unsigned i = 0; i < t; i++)
		pthread_join(th[i], NULL);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--no-report") == 0)
		report = 0;
	/* Reported before the agent runs: ignored, as is their free. */
	struct arena early = {"early", 64 << 10, NULL};
	for (int i = 0; i < 64; i++)
		arena_free(&early, arena_alloc(&early, 1024));
	int rc = pullprof_start(NULL);
	if (rc) {
		fprintf(stderr, "pool: pullprof_start: %s\n",
		        pullprof_strerror(rc));
		return 1;
	}
	arena_reset(&early);
	printf("ready %d\n", pullprof_port());
	fflush(stdout);

	char line[128];
	while (fgets(line, sizeof line, stdin)) {
		unsigned long n = 0;
		unsigned t = 0;
		if (sscanf(line, "threads %u %lu", &t, &n) == 2) {
			printf(run_threads(t, n) ? "error: threads\n"
			                         : "ok %u\n",
			       t);
		} else if (sscanf(line, "run %lu", &n) == 1) {
			for (unsigned long i = 0; i < n; i++)
				handle_request();
			printf("ok %lu\n", n);
		} else if (sscanf(line, "expire %lu", &n) == 1) {
			expire(n);
			printf("ok %lu\n", n);
		} else if (strcmp(line, "reset\n") == 0) {
			reset_sessions();
			printf("ok\n");
		} else if (strcmp(line, "bad\n") == 0) {
			bad_calls();
			printf("ok\n");
		} else if (strcmp(line, "truth\n") == 0) {
			printf("truth");
			for (int s = 0; s < SITES; s++)
				printf(" %s %llu %llu", site_names[s],
				       (unsigned long long)allocated[s],
				       (unsigned long long)inuse[s]);
			printf("\n");
		} else if (strcmp(line, "quit\n") == 0) {
			break;
		} else {
			printf("error: unknown command\n");
		}
		fflush(stdout);
	}
	reset_sessions();
	free(records);
	pullprof_stop();
	return 0;
}
