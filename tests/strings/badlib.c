/* The library tests/strings/badnames loads: the test copies it to a path
 * that is not valid UTF-8 and renames badlib_work in its symbol table to
 * bytes that are not either (objcopy --redefine-sym; dlsym still finds it
 * by .dynsym's name), so that a mapping path and a function name from
 * symbols both carry invalid bytes. Built without debug information: the
 * name comes from the ELF symbol table. */
typedef void (*badlib_cb)(void *arg);

int badlib_work(badlib_cb cb, void *arg);

__attribute__((noinline)) int badlib_work(badlib_cb cb, void *arg)
{
	int before = 1;
	cb(arg);
	__asm__ volatile("" ::: "memory");
	return before + 1;
}
