// contend_cxx: C++ locks as libstdc++ builds them on pthreads, for the mutex
// and block profile tests. Starts the agent on PULLPROF_LISTEN, prints
// "port N"; a line "run" on stdin runs, once, and prints "done":
//   - three threads deposit into one Account (std::mutex, held ~300 us in
//     Account::deposit);
//   - a consumer waits in Queue::pop (std::condition_variable) for items a
//     producer pushes every 2 ms;
//   - readers in Registry::read (std::shared_lock on a std::shared_mutex)
//     wait for a writer holding it ~1 ms in Registry::write.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <iostream>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include <pullprof.h>

static void spin_for(std::chrono::microseconds d)
{
	auto end = std::chrono::steady_clock::now() + d;
	while (std::chrono::steady_clock::now() < end) {
	}
}

struct Account {
	std::mutex m;
	long balance = 0;
	__attribute__((noinline)) void deposit(long v)
	{
		std::lock_guard<std::mutex> g(m);
		spin_for(std::chrono::microseconds(300));
		balance += v;
	}
};

struct Queue {
	std::mutex m;
	std::condition_variable cv;
	std::deque<int> q;
	__attribute__((noinline)) int pop()
	{
		std::unique_lock<std::mutex> l(m);
		cv.wait(l, [this] { return !q.empty(); });
		int v = q.front();
		q.pop_front();
		return v;
	}
	void push(int v)
	{
		{
			std::lock_guard<std::mutex> g(m);
			q.push_back(v);
		}
		cv.notify_one();
	}
};

struct Registry {
	std::shared_mutex m;
	int value = 0;
	__attribute__((noinline)) int read()
	{
		std::shared_lock<std::shared_mutex> l(m);
		return value;
	}
	__attribute__((noinline)) void write()
	{
		std::unique_lock<std::shared_mutex> l(m);
		spin_for(std::chrono::microseconds(1000));
		value++;
	}
};

static void run()
{
	Account account;
	Queue queue;
	Registry registry;
	std::vector<std::thread> ts;
	for (int i = 0; i < 3; i++)
		ts.emplace_back([&] {
			for (int k = 0; k < 300; k++)
				account.deposit(1);
		});
	ts.emplace_back([&] {
		for (int k = 0; k < 200; k++)
			queue.pop();
	});
	ts.emplace_back([&] {
		for (int k = 0; k < 200; k++) {
			std::this_thread::sleep_for(
			    std::chrono::milliseconds(2));
			queue.push(k);
		}
	});
	ts.emplace_back([&] {
		for (int k = 0; k < 300; k++) {
			registry.write();
			std::this_thread::sleep_for(
			    std::chrono::microseconds(200));
		}
	});
	for (int i = 0; i < 2; i++)
		ts.emplace_back([&] {
			long sum = 0;
			for (int k = 0; k < 3000; k++) {
				sum += registry.read();
				std::this_thread::sleep_for(
				    std::chrono::microseconds(100));
			}
			(void)sum;
		});
	for (auto &t : ts)
		t.join();
}

int main()
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	int rc = pullprof_start(nullptr);
	if (rc) {
		std::fprintf(stderr, "contend_cxx: %s\n",
		             pullprof_strerror(rc));
		return 1;
	}
	std::printf("port %d\n", pullprof_port());
	std::string line;
	while (std::getline(std::cin, line)) {
		if (line == "run") {
			run();
			std::printf("done\n");
		}
	}
	return 0;
}
