/* A library the symbolization test loads with dlopen: its function must be
 * named, with file and line, from a mapping that appeared after start. */
typedef void (*symtest_cb)(void *arg);

int symtest_dl_function(symtest_cb cb, void *arg);

__attribute__((noinline)) int symtest_dl_function(symtest_cb cb, void *arg)
{
	int before = 1;
	cb(arg); /* MARK:dl_call */
	return before + 1;
}
