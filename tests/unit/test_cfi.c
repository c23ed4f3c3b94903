/* Unit test of the compact frame tables' builder (src/unwind/cfi.c): the
 * rows it builds for real binaries — the C library this test runs with, a
 * test host built here (tests/cpu/deep) and a C++ one
 * (tests/locks/contend_cxx) — checked row by row against binutils' own
 * reading of the same file, `readelf --wide --debug-dump=frames-interp`
 * (with no-follow-links: a separate debug file's .eh_frame is empty):
 * at every row readelf prints, the rule the walk would use (the CFA as sp
 * or the frame pointer plus an offset, where the frame pointer was saved,
 * the return address at CFA - 8) must say what readelf says; a row whose
 * rules a compact row cannot express must be exactly a row the builder
 * marked for libunwind (PP_FRAME_UNSUPPORTED). The file is laid out in
 * memory as the loader would (its PT_LOAD segments at their addresses),
 * and the table built from there, as the registry builds it from a loaded
 * image. The register names are x86_64's: another architecture's port
 * brings its own expectations. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <elf.h>
#include <gnu/libc-version.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unwind/cfi.h"
#include "unwind/frames.h"

/* A file's loadable segments at their addresses (base + p_vaddr). */
struct image {
	unsigned char *mem;
	uintptr_t base, lo, hi, hdr;
};

static int load_image(const char *path, struct image *im)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *file = malloc((size_t)size);
	if (!file || fread(file, 1, (size_t)size, f) != (size_t)size) {
		fclose(f);
		free(file);
		return -1;
	}
	fclose(f);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)file;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(file + eh->e_phoff);
	uint64_t lo = UINT64_MAX, hi = 0, hdr = 0;
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_GNU_EH_FRAME)
			hdr = ph[i].p_vaddr;
		if (ph[i].p_type != PT_LOAD)
			continue;
		if (ph[i].p_vaddr < lo)
			lo = ph[i].p_vaddr;
		if (ph[i].p_vaddr + ph[i].p_memsz > hi)
			hi = ph[i].p_vaddr + ph[i].p_memsz;
	}
	if (!hdr || lo >= hi) {
		free(file);
		return -1;
	}
	im->mem = calloc(1, hi - lo);
	if (!im->mem) {
		free(file);
		return -1;
	}
	im->base = (uintptr_t)im->mem - lo;
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD)
			memcpy((void *)(im->base + ph[i].p_vaddr),
			       file + ph[i].p_offset, ph[i].p_filesz);
	im->lo = im->base + lo;
	im->hi = im->base + hi;
	im->hdr = im->base + hdr;
	free(file);
	return 0;
}

/* What readelf's row says the rule must be. */
enum { EXPECT_RULE, EXPECT_EXPRESSION };

struct expect {
	int how;
	uint32_t rule;
};

#define UNSUPPORTED PP_FRAME_RULE(PP_FRAME_UNSUPPORTED, 0, 0, 0)

/* readelf's columns: "rsp+16", "rbp+16", "exp"; "u" (undefined or never
 * set), "s" (same value), "c-16" (saved at CFA - 16), "r12", "v+8", "exp",
 * "vexp" for the registers. */
static struct expect expected(int signal, const char *cfa, const char *fp,
                              const char *sp, const char *ra)
{
	struct expect e = {EXPECT_RULE, UNSUPPORTED};
	if (signal) {
		e.rule = PP_FRAME_RULE(PP_FRAME_SIGNAL, 0, 0, 0);
		return e;
	}
	if (!ra || !strcmp(ra, "u")) {
		e.rule = PP_FRAME_RULE(PP_FRAME_OUTERMOST, 0, 0, 0);
		return e;
	}
	if (strcmp(ra, "c-8") || (sp && strcmp(sp, "u") && strcmp(sp, "s")))
		return e;
	if (!strcmp(cfa, "exp")) {
		/* The PLT's expression, or another: readelf does not show
		 * which (a PLT row, or UNSUPPORTED). */
		e.how = EXPECT_EXPRESSION;
		return e;
	}
	int kind;
	long off;
	if (!strncmp(cfa, "rsp+", 4))
		kind = PP_FRAME_CFA_SP;
	else if (!strncmp(cfa, "rbp+", 4))
		kind = PP_FRAME_CFA_FP;
	else
		return e;
	off = strtol(cfa + 4, NULL, 10);
	if (off < 8 || off > (long)PP_FRAME_MAX_OFF)
		return e;
	long k = 0;
	if (fp && fp[0] == 'c') {
		long at = strtol(fp + 1, NULL, 10);
		if (at >= 0 || at % 8 || -at / 8 > (long)PP_FRAME_MAX_FP)
			return e;
		k = -at / 8;
	} else if (fp && strcmp(fp, "u") && strcmp(fp, "s")) {
		return e;
	}
	e.rule = PP_FRAME_RULE(kind, k, 1, off);
	return e;
}

struct row {
	uint64_t loc;
	char cfa[32], fp[16], sp[16], ra[16];
};

/* A CIE's initial row, kept for its FDEs that add none. */
struct cie {
	unsigned long off;
	int signal;
	struct row row;
	int has_row;
};

struct tally {
	size_t rows, matched, plt, signal, expected_unsupported,
	    got_unsupported, mismatches;
};

static void check_row(const struct pp_frame_table *t, const struct image *im,
                      int signal, const struct row *r, struct tally *ty,
                      const char *path)
{
	struct expect e =
	    expected(signal, r->cfa, r->fp[0] ? r->fp : NULL,
	             r->sp[0] ? r->sp : NULL, r->ra[0] ? r->ra : NULL);
	uint32_t got = pp_frames_rule(t, im->base + r->loc);
	ty->rows++;
	if (PP_FRAME_KIND(got) == PP_FRAME_SIGNAL)
		ty->signal++;
	if (PP_FRAME_KIND(got) == PP_FRAME_UNSUPPORTED)
		ty->got_unsupported++;
	if (e.how == EXPECT_RULE &&
	    PP_FRAME_KIND(e.rule) == PP_FRAME_UNSUPPORTED)
		ty->expected_unsupported++;
	int ok;
	if (e.how == EXPECT_EXPRESSION) {
		ok = PP_FRAME_KIND(got) == PP_FRAME_PLT ||
		     PP_FRAME_KIND(got) == PP_FRAME_UNSUPPORTED;
		if (PP_FRAME_KIND(got) == PP_FRAME_PLT)
			ty->plt++;
		else
			ty->expected_unsupported++;
	} else {
		ok = got == e.rule;
	}
	if (ok) {
		ty->matched++;
		return;
	}
	if (ty->mismatches++ < 10)
		print_message("%s: at %#llx readelf says CFA %s fp %s sp %s "
		              "ra %s (rule %#x), the table %#x\n",
		              path, (unsigned long long)r->loc, r->cfa,
		              r->fp[0] ? r->fp : "-", r->sp[0] ? r->sp : "-",
		              r->ra[0] ? r->ra : "-", e.rule, got);
}

/* Build the table of path and check every row readelf prints. */
static void check_file(const char *path, struct tally *ty)
{
	struct image im = {0};
	memset(ty, 0, sizeof *ty);
	if (load_image(path, &im)) {
		print_message("cannot read %s\n", path);
		fail();
	}
	unsigned char h[16];
	memcpy(h, (void *)im.hdr, sizeof h);
	uintptr_t table;
	size_t count;
	assert_int_equal(pp_cfi_parse_hdr(h, im.hdr, &table, &count), 0);
	struct pp_frame_table *t =
	    pp_cfi_build(im.hdr, table, count, im.lo, im.hi);
	assert_non_null(t);
	assert_int_equal(t->fdes, count);

	char cmd[4200];
	snprintf(cmd, sizeof cmd,
	         "readelf --wide --debug-dump=no-follow-links,frames-interp "
	         "'%s' 2>/dev/null",
	         path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	static struct cie cies[4096];
	size_t ncies = 0;
	struct cie *cur_cie = NULL;
	int in_eh = 0, in_fde = 0, fde_rows = 0;
	uint64_t fde_lo = 0, fde_hi = 0;
	/* Columns of the current table: where fp, sp and ra are. */
	int col_fp = -1, col_sp = -1, col_ra = -1;
	char line[1024];
	int fde_signal = 0;
	size_t fdes = 0;
	while (fgets(line, sizeof line, p)) {
		if (!strncmp(line, "Contents of the ", 16)) {
			in_eh = strstr(line, ".eh_frame section") != NULL;
			continue;
		}
		if (!in_eh)
			continue;
		char *tok[32];
		int n = 0;
		/* A register kept in another is "r10 (r10)": one column. */
		for (char *s = strtok(line, " \t\n"); s && n < 32;
		     s = strtok(NULL, " \t\n")) {
			if (s[0] == '(' && n > 0)
				continue;
			tok[n++] = s;
		}
		if (n == 0)
			continue;
		if (n >= 4 && !strcmp(tok[3], "CIE")) {
			/* An FDE before it that printed no row of its own
			 * has its CIE's initial row at its start. */
			if (in_fde && !fde_rows && cur_cie &&
			    cur_cie->has_row && fde_lo < fde_hi) {
				struct row r = cur_cie->row;
				r.loc = fde_lo;
				check_row(t, &im, fde_signal, &r, ty, path);
			}
			in_fde = 0;
			assert_true(ncies < sizeof cies / sizeof cies[0]);
			cur_cie = &cies[ncies++];
			memset(cur_cie, 0, sizeof *cur_cie);
			cur_cie->off = strtoul(tok[0], NULL, 16);
			cur_cie->signal = n >= 5 && strchr(tok[4], 'S') != NULL;
			col_fp = col_sp = col_ra = -1;
			continue;
		}
		if (n >= 6 && !strcmp(tok[3], "FDE")) {
			if (in_fde && !fde_rows && cur_cie &&
			    cur_cie->has_row && fde_lo < fde_hi) {
				struct row r = cur_cie->row;
				r.loc = fde_lo;
				check_row(t, &im, fde_signal, &r, ty, path);
			}
			unsigned long cie_off =
			    strtoul(tok[4] + strlen("cie="), NULL, 16);
			cur_cie = NULL;
			for (size_t i = 0; i < ncies; i++)
				if (cies[i].off == cie_off)
					cur_cie = &cies[i];
			char *range = tok[5] + strlen("pc=");
			fde_lo = strtoull(range, &range, 16);
			fde_hi = strtoull(range + 2, NULL, 16);
			fde_signal = cur_cie && cur_cie->signal;
			in_fde = 1;
			fde_rows = 0;
			if (fde_lo < fde_hi)
				fdes++;
			continue;
		}
		if (!strcmp(tok[0], "LOC")) {
			col_fp = col_sp = col_ra = -1;
			for (int i = 2; i < n; i++) {
				if (!strcmp(tok[i], "rbp"))
					col_fp = i;
				else if (!strcmp(tok[i], "rsp"))
					col_sp = i;
				else if (!strcmp(tok[i], "ra"))
					col_ra = i;
			}
			continue;
		}
		if (n < 2 || strlen(tok[0]) != 16)
			continue; /* ZERO terminator, anything else */
		struct row r;
		memset(&r, 0, sizeof r);
		r.loc = strtoull(tok[0], NULL, 16);
		snprintf(r.cfa, sizeof r.cfa, "%s", tok[1]);
		if (col_fp >= 0 && col_fp < n)
			snprintf(r.fp, sizeof r.fp, "%s", tok[col_fp]);
		if (col_sp >= 0 && col_sp < n)
			snprintf(r.sp, sizeof r.sp, "%s", tok[col_sp]);
		if (col_ra >= 0 && col_ra < n)
			snprintf(r.ra, sizeof r.ra, "%s", tok[col_ra]);
		if (!in_fde) {
			if (cur_cie) {
				cur_cie->row = r;
				cur_cie->has_row = 1;
			}
			continue;
		}
		fde_rows++;
		if (r.loc >= fde_lo && r.loc < fde_hi)
			check_row(t, &im, fde_signal, &r, ty, path);
	}
	if (in_fde && !fde_rows && cur_cie && cur_cie->has_row &&
	    fde_lo < fde_hi) {
		struct row r = cur_cie->row;
		r.loc = fde_lo;
		check_row(t, &im, fde_signal, &r, ty, path);
	}
	assert_int_equal(pclose(p), 0);
	print_message("%s: %zu FDEs, %zu rows checked, %zu as readelf says "
	              "(%zu PLT), %zu rows left to libunwind (expected %zu; "
	              "the table holds %zu such rows of %zu)\n",
	              path, fdes, ty->rows, ty->matched, ty->plt,
	              ty->got_unsupported, ty->expected_unsupported,
	              t->unsupported, t->n);
	assert_true(ty->rows > 0);
	assert_int_equal(ty->mismatches, 0);
	assert_int_equal(ty->got_unsupported, ty->expected_unsupported);
	pp_cfi_free(t);
	free(im.mem);
}

static void test_libc(void **state)
{
	(void)state;
	Dl_info info;
	/* The C library this test runs with, wherever it is installed: found
	 * by a function no sanitizer runtime defines (ASan's and TSan's
	 * define printf, and come first). */
	assert_true(dladdr((void *)&gnu_get_libc_version, &info) &&
	            info.dli_fname);
	struct tally ty;
	check_file(info.dli_fname, &ty);
	assert_true(ty.rows > 10000);
	/* glibc's signal trampoline (__restore_rt) is described by CFI
	 * with the 'S' augmentation: the walk's way through signal frames. */
	assert_true(ty.signal > 0);
}

static void test_c_host(void **state)
{
	(void)state;
	struct tally ty;
	check_file("tests/cpu/deep", &ty);
	assert_true(ty.plt > 0); /* its .plt's expression */
}

static void test_cxx_host(void **state)
{
	(void)state;
	struct tally ty;
	check_file("tests/locks/contend_cxx", &ty);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_libc),
	    cmocka_unit_test(test_c_host),
	    cmocka_unit_test(test_cxx_host),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
