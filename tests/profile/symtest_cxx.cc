// The C++ part of the symbolization test: a function in a namespace, whose
// name must come out demangled with the mangled one as system_name.
#include <string>

extern "C" void symtest_capture(void *arg);

// A real C++ program has the C++ runtime loaded, and with it the demangler.
std::string symtest_tag = "symtest";

namespace symtest
{

__attribute__((noinline)) int compute(void *c, int x)
{
	symtest_capture(c); // MARK:cxx_call
	return x * 2 + (int)symtest_tag.size();
}

} // namespace symtest

extern "C" int symtest_cxx_entry(void *c)
{
	return symtest::compute(c, 20) + 1;
}
