// SPDX-License-Identifier: MIT OR Apache-2.0
// lagtrace OUT.txt: load lagtrace.bpf.o (next to this binary), write one text line per row
// until SIGINT/SIGTERM. A diagnostic for the attach labs, not part of triage.
// Columns: t_ns kind tid nice weight on_rq delayed eligible is_curr throttled key dkey vlag
//          sum_w sum_weight sum_exec slice runtime_remaining flags cfs cpu
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct row {
	uint64_t t, cfs;
	int64_t key, dkey, vlag, sum_w, sum_weight;
	uint64_t sum_exec;
	int64_t runtime_remaining;
	uint64_t slice;
	uint32_t kind, tid, flags, weight;
	int32_t nice;
	uint32_t cpu;
	uint8_t on_rq, delayed, eligible, is_curr, throttled, pad[3];
};

static const char *kinds[] = {"wake", "enq", "deq", "prev", "next", "snap", "deqpre"};
static volatile sig_atomic_t stop;
static FILE *out;
static unsigned long long n;

static void on_sig(int s) { (void)s; stop = 1; }

static int on_row(void *ctx, void *data, size_t len)
{
	const struct row *r = data;
	(void)ctx;
	if (len < sizeof(*r) || r->kind > 6)
		return 0;
	fprintf(out, "%llu %s %u %d %u %u %u %u %u %u %lld %lld %lld %lld %lld %llu %llu %lld %#x %llx %u\n",
		(unsigned long long)r->t, kinds[r->kind], r->tid, r->nice, r->weight, r->on_rq,
		r->delayed, r->eligible, r->is_curr, r->throttled, (long long)r->key,
		(long long)r->dkey, (long long)r->vlag, (long long)r->sum_w,
		(long long)r->sum_weight, (unsigned long long)r->sum_exec,
		(unsigned long long)r->slice, (long long)r->runtime_remaining, r->flags,
		(unsigned long long)r->cfs, r->cpu);
	n++;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: lagtrace OUT.txt\n");
		return 2;
	}
	char self[PATH_MAX], obj[PATH_MAX + 32];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (k < 0)
		return 1;
	self[k] = 0;
	snprintf(obj, sizeof(obj), "%s/lagtrace.bpf.o", dirname(self));
	out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	struct bpf_object *o = bpf_object__open_file(obj, NULL);
	if (!o || bpf_object__load(o)) {
		fprintf(stderr, "lagtrace: cannot load %s: %s\n", obj, strerror(errno));
		return 1;
	}
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, o)
	{
		if (!bpf_program__attach(prog)) {
			fprintf(stderr, "lagtrace: cannot attach %s\n", bpf_program__name(prog));
			return 1;
		}
	}
	struct ring_buffer *rb =
		ring_buffer__new(bpf_map__fd(bpf_object__find_map_by_name(o, "rows")), on_row, NULL, NULL);
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	fprintf(stderr, "lagtrace: attached, writing %s\n", argv[1]);
	while (!stop)
		ring_buffer__poll(rb, 100);
	ring_buffer__consume(rb);
	uint32_t z = 0;
	uint64_t dropped = 0;
	bpf_map_lookup_elem(bpf_map__fd(bpf_object__find_map_by_name(o, "dropped")), &z, &dropped);
	fprintf(stderr, "lagtrace: %llu rows, %llu dropped\n", n, (unsigned long long)dropped);
	fclose(out);
	return 0;
}
