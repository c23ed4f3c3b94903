/*
 * The files symbols come from (debuginfo.c), for symtab.c: libdwfl's
 * callbacks that find a module's ELF file and its separate debug file on
 * this machine and hand them over in memory, no descriptor held; the dwz
 * file a debug file names; the shortage of descriptors they met.
 * Context: agent.
 */
#ifndef PP_DEBUGINFO_H
#define PP_DEBUGINFO_H

#include <elfutils/libdwfl.h>

/* For this process's modules: each file read into memory and closed at
 * once; a file without DWARF replaced by its separate debug file. */
extern const Dwfl_Callbacks pp_debuginfo_self_callbacks;
/* For files given by path (pp_symtab_new, in pullprof-convert): libdwfl
 * opens them itself; the debug file is searched for the same way. */
extern const Dwfl_Callbacks pp_debuginfo_file_callbacks;
/* EMFILE or ENFILE when a file the calling thread asked for since the last
 * call could not be opened for want of descriptors, else 0. */
int pp_debuginfo_take_shortage(void);
/* The dwz file (.gnu_debugaltlink) of the debug file dwfile: name and
 * build ID as the link gives them. In memory, or NULL. */
Elf *pp_debuginfo_open_alt(const char *name, const void *id, int idlen,
                           const char *dwfile);

#endif
