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
 * image.
 *
 * The same source checks AArch64's tables: built for arm64 it reads its
 * own C library; built on another processor with PP_ARCH_TABLES_AARCH64
 * (tests/unit/test_cfi_aarch64: the builder and arch/aarch64.c compiled
 * for AArch64's rules), it reads the arm64 files a multiarch system holds
 * (/usr/lib/aarch64-linux-gnu) and any named in PP_TEST_CFI_FILES
 * (space-separated: a host cross-built with -mbranch-protection=standard
 * checks DW_CFA_AARCH64_negate_ra_state). On AArch64 a return address
 * readelf shows as "u" is in x30 (the CIEs leave it there), unless the FDE
 * says DW_CFA_undefined for it (the outermost frame): readelf's plain
 * --debug-dump=frames tells the two apart. */
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

/* readelf's names of the frame pointer and sp, as columns and in the CFA
 * column ("rsp+16", "x29+32"). */
#if PP_ARCH_HAS_LINK_REGISTER
#define NAME_FP "x29"
#define NAME_SP "sp"
#define FOREIGN_DIR "/usr/lib/aarch64-linux-gnu/"
#else
#define NAME_FP "rbp"
#define NAME_SP "rsp"
#endif
#if defined(PP_ARCH_TABLES_AARCH64) && !defined(__aarch64__)
#define FOREIGN 1 /* the files are another processor's */
#else
#define FOREIGN 0
#endif

#ifdef PP_ARCH_TABLES_AARCH64
/* This build links the table builder alone (src/unwind/cfi.c), not the
 * agent: the flag its checked reads look at (util/seccomp.c defines it;
 * 0, no filter forbids process_vm_readv, as in this process). */
_Atomic int pp_seccomp_vm_readv_off;
#endif

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
	/* Aligned as the loader aligns an image (adrp computes 4 KiB pages
	 * from the pc: pp_arch_call_target reads the GOT so). */
	void *mem;
	if (posix_memalign(&mem, 1u << 16, hi - lo)) {
		free(file);
		return -1;
	}
	memset(mem, 0, hi - lo);
	im->mem = mem;
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
                              const char *sp, const char *ra, int ra_undefined)
{
	struct expect e = {EXPECT_RULE, UNSUPPORTED};
	long ra_k = 1; /* x86_64: always at CFA - 8 */
	if (signal) {
		e.rule = PP_FRAME_RULE(PP_FRAME_SIGNAL, 0, 0, 0);
		return e;
	}
	if (!ra || !strcmp(ra, "u")) {
		if (!PP_ARCH_HAS_LINK_REGISTER || ra_undefined) {
			e.rule = PP_FRAME_RULE(PP_FRAME_OUTERMOST, 0, 0, 0);
			return e;
		}
		ra_k = 0; /* still in the link register */
	} else if (PP_ARCH_HAS_LINK_REGISTER && ra[0] == 'c') {
		long at = strtol(ra + 1, NULL, 10);
		if (at >= 0 || at % 8 || -at / 8 > (long)PP_ARCH_RULE_MAX_RA)
			return e;
		ra_k = -at / 8;
	} else if (strcmp(ra, "c-8")) {
		return e;
	}
	if (sp && strcmp(sp, "u") && strcmp(sp, "s"))
		return e;
	if (!strcmp(cfa, "exp")) {
		/* The PLT's expression, or another: readelf does not show
		 * which (a PLT row, or UNSUPPORTED). */
		e.how = EXPECT_EXPRESSION;
		return e;
	}
	int kind;
	long off;
	size_t len;
	if (!strncmp(cfa, NAME_SP "+", (len = strlen(NAME_SP "+"))))
		kind = PP_FRAME_CFA_SP;
	else if (!strncmp(cfa, NAME_FP "+", (len = strlen(NAME_FP "+"))))
		kind = PP_FRAME_CFA_FP;
	else
		return e;
	off = strtol(cfa + len, NULL, 10);
	/* The CFA is above sp, or at it while the return address is in the
	 * link register (a leaf). */
	if (off < 8 * ra_k || off > (long)PP_FRAME_MAX_OFF)
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
	e.rule = PP_FRAME_RULE(kind, k, ra_k, off);
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
	size_t in_lr, outermost; /* rows whose return address is in the link
	                          * register; outermost rows */
};

/* Where an FDE's program makes the return address undefined (its first
 * pc, and the location from which on): readelf's frames-interp shows that
 * as "u", as it shows a register never saved. */
static struct {
	uint64_t fde, from;
} * ra_undefined;
static size_t n_ra_undefined;

static void find_ra_undefined(const char *path)
{
	char cmd[4200], line[1024], want[64];
	uint64_t fde = 0, loc = 0;
	snprintf(cmd, sizeof cmd,
	         "readelf --wide --debug-dump=no-follow-links,frames "
	         "'%s' 2>/dev/null",
	         path);
	snprintf(want, sizeof want, "DW_CFA_undefined: r%d ", PP_ARCH_DW_RA);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	n_ra_undefined = 0;
	while (fgets(line, sizeof line, p)) {
		char *at = strstr(line, " FDE cie=");
		if (at && (at = strstr(at, "pc="))) {
			fde = loc = strtoull(at + 3, NULL, 16);
			continue;
		}
		/* "DW_CFA_advance_loc: 4 to 0000000000001744" */
		if (strstr(line, "DW_CFA_advance_loc") &&
		    (at = strstr(line, " to "))) {
			loc = strtoull(at + 4, NULL, 16);
			continue;
		}
		if (!strstr(line, want))
			continue;
		void *v = realloc(ra_undefined,
		                  (n_ra_undefined + 1) * sizeof *ra_undefined);
		assert_non_null(v);
		ra_undefined = v;
		ra_undefined[n_ra_undefined].fde = fde;
		ra_undefined[n_ra_undefined++].from = loc;
	}
	assert_int_equal(pclose(p), 0);
}

static int is_ra_undefined(uint64_t fde, uint64_t loc)
{
	for (size_t i = 0; i < n_ra_undefined; i++)
		if (ra_undefined[i].fde == fde && loc >= ra_undefined[i].from)
			return 1;
	return 0;
}

static void check_row(const struct pp_frame_table *t, const struct image *im,
                      int signal, const struct row *r, uint64_t fde,
                      struct tally *ty, const char *path)
{
	struct expect e = expected(
	    signal, r->cfa, r->fp[0] ? r->fp : NULL, r->sp[0] ? r->sp : NULL,
	    r->ra[0] ? r->ra : NULL, is_ra_undefined(fde, r->loc));
	uint32_t got = pp_frames_rule(t, im->base + r->loc);
	ty->rows++;
	if (PP_FRAME_KIND(got) == PP_FRAME_SIGNAL)
		ty->signal++;
	if (PP_FRAME_KIND(got) == PP_FRAME_UNSUPPORTED)
		ty->got_unsupported++;
	if (PP_FRAME_KIND(got) == PP_FRAME_OUTERMOST)
		ty->outermost++;
	if ((PP_FRAME_KIND(got) == PP_FRAME_CFA_SP ||
	     PP_FRAME_KIND(got) == PP_FRAME_CFA_FP) &&
	    PP_FRAME_RA(got) == 0)
		ty->in_lr++;
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
	find_ra_undefined(path);

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
				check_row(t, &im, fde_signal, &r, fde_lo, ty,
				          path);
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
				check_row(t, &im, fde_signal, &r, fde_lo, ty,
				          path);
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
				if (!strcmp(tok[i], NAME_FP))
					col_fp = i;
				else if (!strcmp(tok[i], NAME_SP))
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
			check_row(t, &im, fde_signal, &r, fde_lo, ty, path);
	}
	if (in_fde && !fde_rows && cur_cie && cur_cie->has_row &&
	    fde_lo < fde_hi) {
		struct row r = cur_cie->row;
		r.loc = fde_lo;
		check_row(t, &im, fde_signal, &r, fde_lo, ty, path);
	}
	assert_int_equal(pclose(p), 0);
	print_message("%s: %zu FDEs, %zu rows checked, %zu as readelf says "
	              "(%zu PLT, %zu return address in the link register, "
	              "%zu outermost), %zu rows left to libunwind (expected "
	              "%zu; the table holds %zu such rows of %zu)\n",
	              path, fdes, ty->rows, ty->matched, ty->plt, ty->in_lr,
	              ty->outermost, ty->got_unsupported,
	              ty->expected_unsupported, t->unsupported, t->n);
	assert_true(ty->rows > 0);
	assert_int_equal(ty->mismatches, 0);
	assert_int_equal(ty->got_unsupported, ty->expected_unsupported);
	pp_cfi_free(t);
	free(im.mem);
}

#if !FOREIGN
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
#if !PP_ARCH_HAS_LINK_REGISTER
	/* glibc's signal trampoline (__restore_rt) is described by CFI
	 * with the 'S' augmentation: the walk's way through signal frames.
	 * (AArch64's is the vDSO's.) */
	assert_true(ty.signal > 0);
#else
	assert_true(ty.in_lr > 0);
#endif
}

static void test_c_host(void **state)
{
	(void)state;
	struct tally ty;
	check_file("tests/cpu/deep", &ty);
#if !PP_ARCH_HAS_LINK_REGISTER
	assert_true(ty.plt > 0); /* its .plt's expression */
#endif
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
#else
/* AArch64's files, read on another processor. */
static void test_foreign_libc(void **state)
{
	(void)state;
	const char *libc = FOREIGN_DIR "libc.so.6";
	FILE *f = fopen(libc, "rb");
	if (!f) {
		print_message("no %s (dpkg --add-architecture arm64; apt-get "
		              "install libc6:arm64)\n",
		              libc);
		skip();
	}
	fclose(f);
	struct tally ty;
	check_file(libc, &ty);
	assert_true(ty.rows > 10000);
	assert_true(ty.in_lr > 0);     /* leaves and prologues */
	assert_true(ty.outermost > 0); /* _start, clone's child */
}

/* The other arm64 libraries the build links (libdw, libunwind,
 * libstdc++: GCC's and the C++ runtime's CFI), and PP_TEST_CFI_FILES. */
static void test_foreign_more(void **state)
{
	(void)state;
	static const char *const libs[] = {
	    FOREIGN_DIR "libdw.so.1",
	    FOREIGN_DIR "libunwind.so.8",
	    FOREIGN_DIR "libstdc++.so.6",
	    "/usr/aarch64-linux-gnu/lib/libstdc++.so.6",
	};
	size_t checked = 0;
	for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
		FILE *f = fopen(libs[i], "rb");
		if (!f)
			continue;
		fclose(f);
		struct tally ty;
		check_file(libs[i], &ty);
		checked++;
	}
	const char *more = getenv("PP_TEST_CFI_FILES");
	char buf[4096];
	snprintf(buf, sizeof buf, "%s", more ? more : "");
	char *save = NULL; /* check_file uses strtok */
	for (char *p = strtok_r(buf, " ", &save); p;
	     p = strtok_r(NULL, " ", &save)) {
		struct tally ty;
		check_file(p, &ty);
		checked++;
	}
	if (!checked)
		skip();
}

/* The calls the walks from outside decode (pp_arch_after_call,
 * pp_arch_call_target), against the arm64 libc's PLT: every bl to a PLT
 * stub must be taken for a call, and its target read from a GOT slot that
 * readelf says is a R_AARCH64_JUMP_SLOT (or an ifunc's IRELATIVE). */
static struct image call_im;
static uintptr_t last_slot;

static size_t copy_image(uintptr_t addr, void *out, size_t n)
{
	if (addr < call_im.lo || addr > call_im.hi || n > call_im.hi - addr)
		return 0;
	if (n == 8)
		last_slot = addr;
	memcpy(out, (void *)addr, n);
	return n;
}

/* The bl instructions of path's code; how many went through a PLT stub
 * (each checked). */
static size_t check_calls(const char *path)
{
	if (load_image(path, &call_im))
		return 0;
	char cmd[4200], line[512];
	uint64_t slots[4096];
	size_t nslots = 0;
	snprintf(cmd, sizeof cmd, "readelf -rW '%s'", path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof line, p))
		if ((strstr(line, "R_AARCH64_JUMP_SLOT") ||
		     strstr(line, "R_AARCH64_IRELATIVE")) && /* an ifunc's */
		    nslots < sizeof slots / sizeof slots[0])
			slots[nslots++] = strtoull(line, NULL, 16);
	assert_int_equal(pclose(p), 0);
	size_t calls = 0, via_plt = 0, bti = 0;
	for (uintptr_t a = call_im.lo; a + 8 <= call_im.hi; a += 4) {
		uint32_t w;
		memcpy(&w, (void *)a, 4);
		if ((w & 0xfc000000u) != 0x94000000u) /* bl */
			continue;
		calls++;
		assert_true(pp_arch_after_call((const unsigned char *)a));
		last_slot = 0;
		uintptr_t fn = pp_arch_call_target(a + 4, copy_image);
		if (!last_slot)
			continue; /* a direct call (or data that looks like one)
			           */
		via_plt++;
		int64_t rel =
		    (int64_t)((uint64_t)(w & 0x03ffffffu) << 38) >> 36;
		uint32_t first;
		memcpy(&first, (void *)(a + (uintptr_t)rel), 4);
		bti += first == 0xd503245fu;
		uint64_t at = last_slot - call_im.base;
		int known = 0;
		for (size_t i = 0; i < nslots; i++)
			known |= slots[i] == at;
		if (!known)
			print_message(
			    "bl at %#llx: slot %#llx is no PLT slot\n",
			    (unsigned long long)(a - call_im.base),
			    (unsigned long long)at);
		assert_true(known);
		uint64_t want;
		memcpy(&want, (void *)last_slot, 8);
		assert_true(fn == want);
	}
	print_message("%s: %zu bl, %zu through the PLT to its GOT slot (%zu "
	              "slots; %zu stubs with bti c)\n",
	              path, calls, via_plt, nslots, bti);
	free(call_im.mem);
	return via_plt;
}

static void test_foreign_calls(void **state)
{
	(void)state;
	const char *libc = FOREIGN_DIR "libc.so.6";
	FILE *f = fopen(libc, "rb");
	if (!f)
		skip();
	fclose(f);
	assert_true(check_calls(libc) > 0);
	/* blr x1, blraaz x16: calls through a register; b, ret, nop: not */
	static const uint32_t yes[] = {0xd63f0020u, 0xd63f0a1fu};
	static const uint32_t no[] = {0x14000010u, 0xd65f03c0u, 0xd503201fu};
	for (size_t i = 0; i < 2; i++)
		assert_true(pp_arch_after_call((const unsigned char *)&yes[i]));
	for (size_t i = 0; i < 3; i++)
		assert_false(pp_arch_after_call((const unsigned char *)&no[i]));
	const char *more = getenv("PP_TEST_CFI_FILES");
	char buf[4096], *save = NULL;
	snprintf(buf, sizeof buf, "%s", more ? more : "");
	for (char *p = strtok_r(buf, " ", &save); p;
	     p = strtok_r(NULL, " ", &save))
		check_calls(p);
}

static size_t copy_plain(uintptr_t addr, void *out, size_t n)
{
	memcpy(out, (const void *)addr, n);
	return n;
}

/* The rule of an image without CFI (Debian 12's arm64 vDSO): frameless
 * leaves when no instruction moves sp, stores x30 or calls. */
static void test_foreign_bare(void **state)
{
	(void)state;
	/* From the vDSO's __kernel_clock_gettime: paciasp; cmp w0, #15;
	 * mrs x2, cntvct_el0; add x4, sp, x4; ldr xzr, [x4]; ldp x11, x10,
	 * [x3, #8]; stp x6, x0, [x1]; ret; then its rt_sigreturn. */
	static uint32_t leaf[] = {0xd503233fu, 0x71003c1fu, 0xd53be042u,
	                          0x8b2463e4u, 0xf940009fu, 0xa940a86bu,
	                          0xa9000026u, 0xd65f03c0u, 0xd503201fu,
	                          0xd2801168u, 0xd4000001u, 0xd503201fu};
	uintptr_t lo = (uintptr_t)leaf, hi = lo + sizeof leaf;
	uint32_t r = pp_arch_bare_rule(lo, hi, copy_plain);
	assert_int_equal(PP_FRAME_KIND(r), PP_FRAME_CFA_SP);
	assert_int_equal(PP_ARCH_RULE_OFF(r), 0);
	assert_int_equal(PP_ARCH_RULE_RA(r), 0);
	assert_int_equal(PP_ARCH_RULE_FP(r), 0);
	/* Each of these makes a frame: stp x29, x30, [sp, #-16]!;
	 * sub sp, sp, #16; str x30, [sp, #-16]!; bl; blr x1; blraaz x16;
	 * stp x19, x30, [sp, #16]; add sp, sp, x1 (extended). */
	static const uint32_t frame[] = {0xa9bf7bfdu, 0xd10043ffu, 0xf81f0ffeu,
	                                 0x94000010u, 0xd63f0020u, 0xd63f0a1fu,
	                                 0xa9017bf3u, 0x8b2163ffu};
	for (size_t i = 0; i < sizeof frame / sizeof *frame; i++) {
		uint32_t saved = leaf[3];
		leaf[3] = frame[i];
		assert_int_equal(pp_arch_bare_rule(lo, hi, copy_plain), 0);
		leaf[3] = saved;
	}
	/* mov x29, sp (add x29, sp, #0) writes x29, not sp. */
	leaf[3] = 0x910003fdu;
	assert_int_not_equal(pp_arch_bare_rule(lo, hi, copy_plain), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_foreign_libc),
	    cmocka_unit_test(test_foreign_calls),
	    cmocka_unit_test(test_foreign_more),
	    cmocka_unit_test(test_foreign_bare),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
