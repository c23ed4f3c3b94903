/*
 * Symbols looked up by name in an ELF file's own symbol tables (.symtab,
 * and .dynsym), for what the dynamic linker cannot find: a function of an
 * allocator linked statically into the executable is in its .symtab only
 * (the executable exports just what the libraries it was linked with
 * refer to, malloc and operator new among them), so dlsym() does not see
 * it. The file is read through libelf, mapped for the lookup only, its
 * descriptor counted (util/fds.h) and closed before the lookup returns.
 * Context: agent.
 */
#ifndef PP_SYMBOLS_ELFSYM_H
#define PP_SYMBOLS_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

struct pp_elfsym {
	const char *name; /* in: the symbol's name as in the file (mangled) */
	uint64_t value;   /* out: st_value, 0 when not found */
	uint64_t size;    /* out: st_size */
	int found;        /* out: defined (not an undefined reference) */
};

enum {
	PP_ELFSYM_SYMTAB = 1, /* the file has a .symtab (not stripped) */
	PP_ELFSYM_DYNSYM = 2, /* ... and a .dynsym */
	PP_ELFSYM_PIE = 4, /* ET_DYN: values are offsets from the load bias */
};

/*
 * Look up each of syms[0..n) in the ELF file at path: its defined
 * symbols of .symtab, then of .dynsym for names .symtab lacks. *flags
 * (may be NULL) gets PP_ELFSYM_*. Returns how many were found, or a
 * negative errno: -ENOENT, -EACCES, -EMFILE (the open's), -ENOEXEC (not
 * an ELF file libelf reads), -ENOMEM.
 */
int pp_elfsym_lookup(const char *path, struct pp_elfsym *syms, size_t n,
                     unsigned *flags);

/*
 * Does the ELF file at path hold a string that is s followed by
 * characters of rest only, one at least (none when rest is ""; anything
 * when rest is NULL: a string that starts with s) in one of its allocated,
 * non-executable, read-only sections
 * (.rodata and the like)? 1, 0, or a negative errno as above. For a stripped
 * file, whose names are gone but whose strings are not. When it does and out is
 * given, that whole string is copied into out (outlen bytes at most,
 * NUL-terminated).
 */
int pp_elfsym_has_string(const char *path, const char *s, const char *rest,
                         char *out, size_t outlen);

#endif
