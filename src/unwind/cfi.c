/*
 * Context: agent.
 *
 * Building the compact frame tables (cfi.h): each FDE's CFA program run
 * once, its rows turned into rules by the architecture
 * (pp_arch_cfi_rule), and the rows kept where fork does not copy them.
 */
#define _GNU_SOURCE 1
#include "unwind/cfi.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "arch/arch.h"
#include "unwind/frames.h"
#include "util/seccomp.h"

/* Read n bytes of this process at addr into out; 0 or -1 (unmapped). */
static int copy_in(uintptr_t addr, void *out, size_t n)
{
	struct iovec local = {out, n};
	struct iovec remote = {(void *)addr, n};
	if (pp_seccomp_vm_readv_forbidden())
		return -1;
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
	               (ssize_t)n
	           ? 0
	           : -1;
}

/* The same as pp_arch_copy_fn wants it: the bytes read. */
static size_t copy_some(uintptr_t addr, void *out, size_t n)
{
	return copy_in(addr, out, n) ? 0 : n;
}

/* A cursor over a copy of image memory: p walks buf, whose first byte was
 * at address `addr` in the image. */
struct cur {
	const unsigned char *p, *end;
	const unsigned char *buf;
	uintptr_t addr;
	int bad;
};

static uintptr_t cur_addr(const struct cur *c)
{
	return c->addr + (uintptr_t)(c->p - c->buf);
}

static int need(struct cur *c, size_t n)
{
	if ((size_t)(c->end - c->p) < n) {
		c->bad = 1;
		c->p = c->end;
		return 0;
	}
	return 1;
}

static uint64_t u8(struct cur *c)
{
	return need(c, 1) ? *c->p++ : 0;
}

static uint64_t fixed(struct cur *c, size_t n)
{
	uint64_t v = 0;
	if (!need(c, n))
		return 0;
	memcpy(&v, c->p, n); /* little-endian */
	c->p += n;
	return v;
}

static uint64_t uleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	for (;;) {
		uint64_t b = u8(c);
		if (c->bad)
			return 0;
		if (shift < 64)
			v |= (b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return v;
	}
}

static int64_t sleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint64_t b;
	do {
		b = u8(c);
		if (c->bad)
			return 0;
		if (shift < 64)
			v |= (b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

enum {
	PE_omit = 0xff,
	PE_absptr = 0x00,
	PE_uleb128 = 0x01,
	PE_udata2 = 0x02,
	PE_udata4 = 0x03,
	PE_udata8 = 0x04,
	PE_sleb128 = 0x09,
	PE_sdata2 = 0x0a,
	PE_sdata4 = 0x0b,
	PE_sdata8 = 0x0c,
	PE_pcrel = 0x10,
	PE_datarel = 0x30,
	PE_indirect = 0x80,
};

/* The pieces of .eh_frame_hdr we rely on: version 1, a 4-byte FDE count,
 * and the table of (initial location, FDE) pairs as 4-byte offsets from the
 * header — what GNU ld, gold and lld write. */
int pp_cfi_parse_hdr(const unsigned char h[16], uintptr_t addr,
                     uintptr_t *table, size_t *count)
{
	size_t off = 4;

	if (h[0] != 1 || h[3] != (PE_datarel | PE_sdata4))
		return -1;
	switch (h[1] & 0x0f) { /* eh_frame_ptr: skipped */
	case PE_udata4:
	case PE_sdata4: off += 4; break;
	case PE_absptr:
	case PE_udata8:
	case PE_sdata8: off += 8; break;
	default: return -1;
	}
	if ((h[2] & 0x0f) != PE_udata4 && (h[2] & 0x0f) != PE_sdata4)
		return -1;
	uint32_t n;
	memcpy(&n, h + off, 4);
	*count = n;
	*table = addr + off + 4;
	return n ? 0 : -1;
}

/* A pointer in encoding `enc`. With `with_base` 0 only the value (a pc
 * range is encoded so); pcrel is relative to the field's address. */
static uintptr_t pointer(struct cur *c, unsigned enc, int with_base,
                         uintptr_t datarel)
{
	uintptr_t here = cur_addr(c);
	uint64_t v;
	switch (enc & 0x0f) {
	case PE_absptr:
	case PE_udata8:
	case PE_sdata8: v = fixed(c, 8); break;
	case PE_uleb128: v = uleb(c); break;
	case PE_sleb128: v = (uint64_t)sleb(c); break;
	case PE_udata2: v = fixed(c, 2); break;
	case PE_sdata2: v = (uint64_t)(int64_t)(int16_t)fixed(c, 2); break;
	case PE_udata4: v = fixed(c, 4); break;
	case PE_sdata4: v = (uint64_t)(int64_t)(int32_t)fixed(c, 4); break;
	default: c->bad = 1; return 0;
	}
	if (!with_base)
		return (uintptr_t)v;
	switch (enc & 0x70) {
	case 0: break;
	case PE_pcrel: v += here; break;
	case PE_datarel: v += datarel; break;
	default: c->bad = 1; return 0;
	}
	return (uintptr_t)v;
}

struct cie {
	unsigned fde_enc;
	int64_t data_align;
	uint64_t code_align;
	unsigned ra_reg;
	int signal;
	int aug_z; /* FDEs carry augmentation data (its length first) */
	const unsigned char *insns, *insns_end;
};

static int parse_cie(const unsigned char *at, struct cur *image,
                     struct cie *out)
{
	struct cur c = *image;
	c.p = at;
	uint64_t len = fixed(&c, 4);
	if (len == 0xffffffffu)
		len = fixed(&c, 8);
	if (c.bad || len > (uint64_t)(c.end - c.p))
		return -1;
	const unsigned char *end = c.p + len;
	c.end = end;
	if (fixed(&c, 4) != 0)
		return -1; /* not a CIE */
	unsigned version = (unsigned)u8(&c);
	const char *aug = (const char *)c.p;
	size_t alen = strnlen(aug, (size_t)(end - c.p));
	if (alen == (size_t)(end - c.p))
		return -1;
	c.p += alen + 1;
	if (strstr(aug, "eh"))
		return -1; /* a pre-2001 layout */
	memset(out, 0, sizeof *out);
	out->code_align = uleb(&c);
	out->data_align = sleb(&c);
	out->ra_reg = version == 1 ? (unsigned)u8(&c) : (unsigned)uleb(&c);
	out->fde_enc = PE_absptr;
	out->aug_z = aug[0] == 'z';
	if (aug[0] == 'z') {
		uint64_t alen2 = uleb(&c);
		const unsigned char *after = c.p + alen2;
		if (alen2 > (uint64_t)(end - c.p))
			return -1;
		for (const char *a = aug + 1; *a && !c.bad; a++) {
			switch (*a) {
			case 'R': out->fde_enc = (unsigned)u8(&c); break;
			case 'L': u8(&c); break;
			case 'P': {
				unsigned enc = (unsigned)u8(&c);
				pointer(&c, enc & ~PE_indirect, 0, 0);
				break;
			}
			case 'S': out->signal = 1; break;
			default: break; /* 'B', 'G': no data */
			}
		}
		c.p = after;
	} else if (aug[0]) {
		return -1; /* unknown augmentation: its data cannot be skipped
		            */
	}
	if (c.bad)
		return -1;
	out->insns = c.p;
	out->insns_end = end;
	return 0;
}

#define R_SAME PP_CFI_SAME
#define R_OFFSET PP_CFI_OFFSET
#define R_UNDEF PP_CFI_UNDEF
#define R_OTHER PP_CFI_OTHER

struct rows {
	struct pp_frame_row *v;
	size_t n, cap, unsupported;
	uintptr_t base;
	int oom;
};

static void emit(struct rows *r, uintptr_t pc, uint32_t rule)
{
	if (pc < r->base || pc - r->base > UINT32_MAX)
		return;
	uint32_t off = (uint32_t)(pc - r->base);
	if (r->n) {
		struct pp_frame_row *last = &r->v[r->n - 1];
		if (off < last->pc)
			return; /* overlapping descriptions: the first wins */
		if (off == last->pc) {
			last->rule = rule; /* an empty row: replaced */
			if (r->n > 1 && r->v[r->n - 2].rule == rule)
				r->n--;
			return;
		}
		if (last->rule == rule)
			return;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 1024;
		struct pp_frame_row *v = realloc(r->v, cap * sizeof *v);
		if (!v) {
			r->oom = 1;
			return;
		}
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = (struct pp_frame_row){off, rule};
}

/* Signal frames and the outermost frame are the same everywhere; the
 * rest is the architecture's. */
static uint32_t rule_of(const struct pp_cfi_state *s, int signal)
{
	if (signal)
		return PP_FRAME_RULE(PP_FRAME_SIGNAL, 0, 0, 0);
	if (s->ra == R_UNDEF)
		return PP_FRAME_RULE(PP_FRAME_OUTERMOST, 0, 0, 0);
	return pp_arch_cfi_rule(s);
}

static void set_reg(struct pp_cfi_state *s, uint64_t reg, int rule, int64_t off,
                    unsigned ra_reg)
{
	if (reg == PP_ARCH_DW_FP) {
		s->fp = rule;
		s->fp_off = off;
	} else if (reg == ra_reg) {
		s->ra = rule;
		s->ra_off = off;
	} else if (reg == PP_ARCH_DW_SP) {
		s->sp = rule == R_SAME ? R_SAME : R_OTHER;
	}
}

/* DW_CFA_restore: reg's rule back to what the CIE's program left. */
static void restore_reg(struct pp_cfi_state *s,
                        const struct pp_cfi_state *initial, uint64_t reg,
                        unsigned ra_reg)
{
	if (reg == PP_ARCH_DW_FP) {
		s->fp = initial->fp;
		s->fp_off = initial->fp_off;
	} else if (reg == ra_reg) {
		s->ra = initial->ra;
		s->ra_off = initial->ra_off;
	} else if (reg == PP_ARCH_DW_SP) {
		s->sp = initial->sp;
	}
}

/* Run a CFA program from pc on, emitting a row at every advance. Returns
 * the pc reached, or 0 when the program is not understood. */
static uintptr_t run_cfa(struct cur *c, struct pp_cfi_state *s,
                         const struct pp_cfi_state *initial,
                         const struct cie *cie, uintptr_t pc, uintptr_t pc_end,
                         struct rows *r, int emit_rows)
{
	struct pp_cfi_state stack[16];
	int depth = 0;

	while (c->p < c->end && !c->bad) {
		unsigned op = (unsigned)u8(c);
		uint64_t reg, delta = 0;
		int advance = 0;
		switch (op & 0xc0) {
		case 0x40:
			delta = (op & 0x3f) * cie->code_align;
			advance = 1;
			break;
		case 0x80:
			set_reg(s, op & 0x3f, R_OFFSET,
			        (int64_t)uleb(c) * cie->data_align,
			        cie->ra_reg);
			continue;
		case 0xc0:
			if (!initial)
				return 0;
			restore_reg(s, initial, op & 0x3f, cie->ra_reg);
			continue;
		default: break;
		}
		if (!advance) {
			switch (op) {
			case 0x00: continue; /* nop */
			case 0x01:           /* set_loc */
				delta = pointer(c, cie->fde_enc, 1, 0) - pc;
				advance = 1;
				break;
			case 0x02:
				delta = fixed(c, 1) * cie->code_align;
				advance = 1;
				break;
			case 0x03:
				delta = fixed(c, 2) * cie->code_align;
				advance = 1;
				break;
			case 0x04:
				delta = fixed(c, 4) * cie->code_align;
				advance = 1;
				break;
			case 0x05: /* offset_extended */
				reg = uleb(c);
				set_reg(s, reg, R_OFFSET,
				        (int64_t)uleb(c) * cie->data_align,
				        cie->ra_reg);
				continue;
			case 0x06: /* restore_extended */
				reg = uleb(c);
				if (!initial)
					return 0;
				restore_reg(s, initial, reg, cie->ra_reg);
				continue;
			case 0x07:
				set_reg(s, uleb(c), R_UNDEF, 0, cie->ra_reg);
				continue;
			case 0x08:
				set_reg(s, uleb(c), R_SAME, 0, cie->ra_reg);
				continue;
			case 0x09: /* register */
				reg = uleb(c);
				uleb(c);
				set_reg(s, reg, R_OTHER, 0, cie->ra_reg);
				continue;
			case 0x0a: /* remember_state */
				if (depth == 16)
					return 0;
				stack[depth++] = *s;
				continue;
			case 0x0b: /* restore_state */
				if (depth == 0)
					return 0;
				/* The CFA rule too, as GCC's unwinder does. */
				*s = stack[--depth];
				continue;
			case 0x0c: /* def_cfa */
				s->cfa_reg = (unsigned)uleb(c);
				s->cfa_off = (int64_t)uleb(c);
				s->cfa_kind = PP_CFI_CFA_REG;
				continue;
			case 0x0d:
				s->cfa_reg = (unsigned)uleb(c);
				s->cfa_kind = PP_CFI_CFA_REG;
				continue;
			case 0x0e: s->cfa_off = (int64_t)uleb(c); continue;
			case 0x0f: { /* def_cfa_expression */
				uint64_t len = uleb(c);
				if (!need(c, len))
					return 0;
				if (!pp_arch_cfa_expression(c->p, (size_t)len,
				                            s))
					s->cfa_kind = PP_CFI_CFA_EXPR;
				c->p += len;
				continue;
			}
			case 0x11: /* offset_extended_sf */
				reg = uleb(c);
				set_reg(s, reg, R_OFFSET,
				        sleb(c) * cie->data_align, cie->ra_reg);
				continue;
			case 0x12: /* def_cfa_sf */
				s->cfa_reg = (unsigned)uleb(c);
				s->cfa_off = sleb(c) * cie->data_align;
				s->cfa_kind = PP_CFI_CFA_REG;
				continue;
			case 0x13:
				s->cfa_off = sleb(c) * cie->data_align;
				continue;
			case 0x14: /* val_offset */
			case 0x15: /* val_offset_sf */
				reg = uleb(c);
				if (op == 0x14)
					uleb(c);
				else
					sleb(c);
				set_reg(s, reg, R_OTHER, 0, cie->ra_reg);
				continue;
			case 0x10: /* expression: a register saved at an address
			            * a DWARF expression computes (a signal
			            * trampoline's, a realigned frame's frame
			            * pointer) */
			case 0x16: /* val_expression */
				reg = uleb(c);
				{
					uint64_t len = uleb(c);
					if (!need(c, len))
						return 0;
					c->p += len;
				}
				set_reg(s, reg, R_OTHER, 0, cie->ra_reg);
				continue;
#ifdef PP_ARCH_CFA_NEGATE_RA_STATE
			/* The signing state of the return address: the walks
			 * strip it whatever the state (arch.h). */
			case PP_ARCH_CFA_NEGATE_RA_STATE: continue;
#endif
			case 0x2e: uleb(c); continue; /* GNU_args_size */
			case 0x2f: /* GNU_negative_offset_extended */
				reg = uleb(c);
				set_reg(s, reg, R_OFFSET,
				        -(int64_t)uleb(c) * cie->data_align,
				        cie->ra_reg);
				continue;
			default: return 0; /* an opcode we do not know */
			}
		}
		if (advance && emit_rows) {
			uintptr_t next = pc + delta;
			if (next > pc_end)
				next = pc_end;
			if (next > pc)
				emit(r, pc, rule_of(s, cie->signal));
			pc = next;
		}
	}
	return c->bad ? 0 : pc;
}

static int fde_cmp(const void *a, const void *b)
{
	const int32_t *x = a, *y = b;
	return (x[0] > y[0]) - (x[0] < y[0]);
}

/*
 * Where the tables live. fork() copies the page tables of the parent's
 * private memory and the child's exit tears them down: the 4.5 MB of tables
 * of a PostgreSQL postmaster's 50 images were copied at every connection's
 * fork. The tables live in shared anonymous regions instead, which fork
 * does not copy (a child maps the same pages, and faults them in only if
 * it reads them).
 *
 * That is safe because a table is never written once built, and a region
 * is written only by the process that mapped it, only in the part it has
 * not handed out yet, which no child has a pointer into: a forked child
 * maps regions of its own for its tables. Space is never reused. What a
 * region holds is counted in private memory (struct region, malloc), and
 * the region is unmapped when its last table is freed, in this process
 * only: a child keeps its mapping. A table that does not get a region is
 * malloc'd, as before.
 */
struct region {
	unsigned char *base;
	size_t size, used;
	size_t live; /* tables not freed yet */
	pid_t pid;   /* the process that hands out its space */
};

#define REGION_SIZE ((size_t)2 << 20)

static struct region *current;

static void region_drop(struct region *r)
{
	munmap(r->base, r->size);
	free(r);
}

static void *table_alloc(size_t bytes, struct region **from)
{
	bytes = (bytes + 63) & ~(size_t)63;
	struct region *r = current;
	pid_t self = getpid();
	if (!r || r->pid != self || r->size - r->used < bytes) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		size_t size = bytes > REGION_SIZE
		                  ? (bytes + page - 1) / page * page
		                  : REGION_SIZE;
		struct region *n = malloc(sizeof *n);
		void *m =
		    n ? mmap(NULL, size, PROT_READ | PROT_WRITE,
		             MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
		      : MAP_FAILED;
		if (m == MAP_FAILED) {
			free(n);
			*from = NULL;
			return malloc(bytes);
		}
		*n = (struct region){m, size, 0, 0, self};
		/* The one it replaces stays while it holds tables; if it is
		 * ours and holds none, nothing will ever free it. */
		if (r && r->pid == self && r->live == 0)
			region_drop(r);
		current = r = n;
	}
	void *p = r->base + r->used;
	r->used += bytes;
	r->live++;
	*from = r;
	return p;
}

static struct pp_frame_table *finish(struct rows *r, uintptr_t lo, uintptr_t hi,
                                     size_t count);

struct pp_frame_table *pp_cfi_build_bare(uintptr_t lo, uintptr_t hi)
{
	struct rows r = {.base = lo};
	uintptr_t tramp = 0;
	size_t len = 0;
	if (!pp_arch_cfi_trampoline(lo, hi, copy_some, &tramp, &len) ||
	    tramp < lo || len == 0 || len > hi - tramp)
		return NULL;
	/* The rest of the code: frameless leaves where the architecture
	 * can tell (arm64's vDSO), else nothing is known there. */
	uint32_t rest = pp_arch_bare_rule(lo, hi, copy_some);
	if (!rest)
		rest = PP_FRAME_RULE(PP_FRAME_END, 0, 0, 0);
	else if (tramp > lo)
		emit(&r, lo, rest);
	emit(&r, tramp, PP_FRAME_RULE(PP_FRAME_SIGNAL, 0, 0, 0));
	emit(&r, tramp + len, rest);
	struct pp_frame_table *out = finish(&r, lo, hi, 0);
	free(r.v);
	return out;
}

void pp_cfi_free(struct pp_frame_table *t)
{
	if (!t)
		return;
	struct region *r = t->region;
	if (!r) {
		free(t);
		return;
	}
	if (--r->live == 0 && (r != current || r->pid != getpid())) {
		if (r == current)
			current = NULL;
		region_drop(r);
	}
}

/* The table of rows r for code [lo, hi) (count FDEs), where fork does
 * not copy it; NULL when out of memory. */
static struct pp_frame_table *finish(struct rows *r, uintptr_t lo, uintptr_t hi,
                                     size_t count)
{
	struct pp_frame_table *out;
	if (r->oom)
		return NULL;
	size_t npages = ((hi - lo) >> PP_FRAME_PAGE_SHIFT) + 2;
	struct region *region;
	out = table_alloc(sizeof *out + r->n * sizeof r->v[0] +
	                      npages * sizeof(uint32_t),
	                  &region);
	if (!out)
		return NULL;
	out->region = region;
	out->base = lo;
	out->n = r->n;
	out->fdes = count;
	out->unsupported = 0;
	for (size_t i = 0; i < r->n; i++) {
		out->rows[i] = r->v[i];
		if (PP_FRAME_KIND(r->v[i].rule) == PP_FRAME_UNSUPPORTED)
			out->unsupported++;
	}
	uint32_t *pages = (uint32_t *)(out->rows + r->n);
	for (size_t p = 0, k = 0; p < npages; p++) {
		uint64_t from = (uint64_t)p << PP_FRAME_PAGE_SHIFT;
		while (k < r->n && out->rows[k].pc < from)
			k++;
		pages[p] = (uint32_t)k;
	}
	out->pages = pages;
	out->npages = npages;
	return out;
}

struct pp_frame_table *pp_cfi_build(uintptr_t hdr, uintptr_t table,
                                    size_t count, uintptr_t lo, uintptr_t hi)
{
	struct pp_frame_table *out = NULL;
	int32_t *entries = NULL;
	unsigned char *eh = NULL;
	struct rows r = {.base = lo};

	if (count == 0 || count > (64u << 20) / 8)
		return NULL;
	entries = malloc(count * 8);
	if (!entries || copy_in(table, entries, count * 8))
		goto done;
	/* The table is sorted by pc already (it is a search table); sorting
	 * again costs little and protects the rows' order. */
	qsort(entries, count, 8, fde_cmp);
	/* The part of .eh_frame the table points into: from the lowest
	 * FDE's CIE (CIEs precede their FDEs) to the end of the highest
	 * FDE. CIE pointers are checked against this copy. */
	uintptr_t first = UINTPTR_MAX, last = 0;
	for (size_t i = 0; i < count; i++) {
		uintptr_t f = hdr + (intptr_t)entries[2 * i + 1];
		if (f < first)
			first = f;
		if (f > last)
			last = f;
	}
	uint32_t last_len;
	if (copy_in(last, &last_len, 4) || last_len == 0xffffffffu)
		goto done;
	uintptr_t end = last + 4 + last_len;
	/* CIEs come before the first FDE: take up to 64 KiB more below it
	 * (what can be read). */
	uintptr_t start = first > (64u << 10) ? first - (64u << 10) : 0;
	if (end - start > (256u << 20))
		goto done;
	eh = malloc(end - start);
	if (!eh)
		goto done;
	while (copy_in(start, eh, end - start)) {
		/* Less room below: halve it until the copy reads. */
		if (start == first)
			goto done;
		start = first - (first - start) / 2;
		if (first - start < 64)
			start = first;
	}
	struct cur image = {eh, eh + (end - start), eh, start, 0};
	/* A signal trampoline without CFI (arch.h): its rows go in their
	 * place among the FDEs'. */
	uintptr_t tramp = 0;
	size_t tramp_len = 0;
	if (!pp_arch_cfi_trampoline(lo, hi, copy_some, &tramp, &tramp_len) ||
	    tramp < lo || tramp_len > hi - tramp)
		tramp_len = 0;
	uint32_t signal = PP_FRAME_RULE(PP_FRAME_SIGNAL, 0, 0, 0);
	uint32_t unsupported = PP_FRAME_RULE(PP_FRAME_UNSUPPORTED, 0, 0, 0);
	uint32_t none = PP_FRAME_RULE(PP_FRAME_END, 0, 0, 0);
	for (size_t i = 0; i < count && !r.oom; i++) {
		uintptr_t f = hdr + (intptr_t)entries[2 * i + 1];
		struct cur c = image;
		c.p = eh + (f - start);
		uint64_t len = fixed(&c, 4);
		if (c.bad || len == 0 || len == 0xffffffffu ||
		    len > (uint64_t)(c.end - c.p))
			continue;
		c.end = c.p + len;
		uintptr_t id_at = cur_addr(&c);
		uint32_t cie_off = (uint32_t)fixed(&c, 4);
		uintptr_t cie_addr = id_at - cie_off;
		struct cie cie;
		if (cie_off == 0 || cie_addr < start || cie_addr >= end ||
		    parse_cie(eh + (cie_addr - start), &image, &cie))
			continue;
		uintptr_t pc = pointer(&c, cie.fde_enc, 1, 0);
		uintptr_t range = pointer(&c, cie.fde_enc, 0, 0);
		if (c.bad || pc < lo || pc >= hi || range > hi - pc)
			continue;
		if (tramp_len && tramp <= pc) {
			/* Before an FDE at the same place (a kernel's CFI for
			 * the nop alone): the first rows win. */
			emit(&r, tramp, signal);
			emit(&r, tramp + tramp_len, none);
			tramp_len = 0;
		}
		if (cie.aug_z) {
			uint64_t alen = uleb(&c);
			if (!need(&c, alen))
				continue;
			c.p += alen;
		}
		struct pp_cfi_state init = {.cfa_reg = PP_ARCH_DW_SP,
		                            .fp = R_SAME,
		                            .ra = R_SAME,
		                            .sp = R_SAME};
		struct cur ci = image;
		ci.p = cie.insns;
		ci.end = cie.insns_end;
		if (!run_cfa(&ci, &init, NULL, &cie, pc, pc + range, &r, 0)) {
			emit(&r, pc, unsupported);
			emit(&r, pc + range, none);
			continue;
		}
		struct pp_cfi_state s = init;
		size_t mark = r.n;
		uintptr_t at =
		    run_cfa(&c, &s, &init, &cie, pc, pc + range, &r, 1);
		if (!at) {
			/* A program not understood: none of its rows. */
			r.n = mark;
			emit(&r, pc, unsupported);
		} else if (at < pc + range) {
			emit(&r, at, rule_of(&s, cie.signal));
		}
		emit(&r, pc + range, none);
	}
	if (tramp_len) {
		emit(&r, tramp, signal);
		emit(&r, tramp + tramp_len, none);
	}
	out = finish(&r, lo, hi, count);
done:
	free(r.v);
	free(eh);
	free(entries);
	return out;
}
