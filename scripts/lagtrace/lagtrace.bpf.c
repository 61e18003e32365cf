// SPDX-License-Identifier: MIT OR Apache-2.0
// lagtrace: a diagnostic, not part of triage. Logs the EEVDF state (vruntime, deadline,
// vlag, sched_delayed, eligibility against the cfs_rq's weighted average) of tasks named
// `apache2` and of every task sharing their leaf cfs_rq (the lab's hog), at each wake-up
// and switch (fentry/fexit are refused on this kernel, so enqueue/dequeue are not hooked); and, when the CPU passes to that cfs_rq from outside it (a
// grant's start after the quota's gap, or a return from another cgroup), one row per
// queued task of the cfs_rq (a snapshot: who was eligible when the pick was made).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define K_WAKEUP 0
#define K_ENQ 1
#define K_DEQ 2
#define K_SW_PREV 3
#define K_SW_NEXT 4
#define K_SNAP 5
#define K_DEQ_PRE 6

struct row {
	__u64 t;
	__u64 cfs;       // the task's cfs_rq (pointer, an id)
	__s64 key;       // vruntime - zero_vruntime
	__s64 dkey;      // deadline - zero_vruntime
	__s64 vlag;      // se.vlag (meaningful off the tree / delayed)
	__s64 sum_w;     // sum_w_vruntime (+ curr's if curr on_rq)
	__s64 sum_weight;// sum_weight (+ curr's)
	__u64 sum_exec;  // se.sum_exec_runtime
	__s64 runtime_remaining;
	__u64 slice;
	__u32 kind;
	__u32 tid;
	__u32 flags;     // enqueue/dequeue flags; switch: prev_state; snap: the picked tid
	__u32 weight;    // scale_load_down(se.load.weight)
	__s32 nice;
	__u32 cpu;
	__u8 on_rq;
	__u8 delayed;
	__u8 eligible;
	__u8 is_curr;
	__u8 throttled;
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64); // task_struct pointer
} tracked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);  // cfs_rq pointer of an apache2 task
	__type(value, __u8);
} cfsrqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

static __always_inline int is_apache(struct task_struct *p)
{
	char c[8] = {};
	bpf_probe_read_kernel(c, sizeof(c), &p->comm);
	return c[0] == 'a' && c[1] == 'p' && c[2] == 'a' && c[3] == 'c' && c[4] == 'h' &&
	       c[5] == 'e' && c[6] == '2' && c[7] == 0;
}

static __always_inline __u64 cfs_of(struct task_struct *p)
{
	return (__u64)BPF_CORE_READ(p, se.cfs_rq);
}

// Is p one of ours? apache2 tasks (their cfs_rq remembered) and tasks in such a cfs_rq.
static __always_inline int ours(struct task_struct *p)
{
	__u64 cfs = cfs_of(p);
	if (is_apache(p)) {
		__u8 one = 1;
		bpf_map_update_elem(&cfsrqs, &cfs, &one, BPF_ANY);
	} else if (!bpf_map_lookup_elem(&cfsrqs, &cfs)) {
		return 0;
	}
	__u32 tid = BPF_CORE_READ(p, pid);
	__u64 ptr = (__u64)p;
	bpf_map_update_elem(&tracked, &tid, &ptr, BPF_ANY);
	return 1;
}

static __always_inline void emit(struct task_struct *p, __u32 kind, __u32 flags, __u64 now)
{
	struct row *r = bpf_ringbuf_reserve(&rows, sizeof(*r), 0);
	if (!r) {
		__u32 z = 0;
		__u64 *d = bpf_map_lookup_elem(&dropped, &z);
		if (d)
			__sync_fetch_and_add(d, 1);
		return;
	}
	struct cfs_rq *cfs = BPF_CORE_READ(p, se.cfs_rq);
	__u64 zero = BPF_CORE_READ(cfs, zero_vruntime);
	__s64 sum_w = BPF_CORE_READ(cfs, sum_w_vruntime);
	__s64 sum_weight = (__s64)BPF_CORE_READ(cfs, sum_weight);
	struct sched_entity *curr = BPF_CORE_READ(cfs, curr);
	__u64 vr = BPF_CORE_READ(p, se.vruntime);
	r->is_curr = curr == &p->se;
	if (curr && BPF_CORE_READ(curr, on_rq)) {
		__s64 w = (__s64)(BPF_CORE_READ(curr, load.weight) >> 10);
		__s64 ck = (__s64)(BPF_CORE_READ(curr, vruntime) - zero);
		sum_w += ck * w;
		sum_weight += w;
	}
	r->t = now;
	r->cfs = (__u64)cfs;
	r->key = (__s64)(vr - zero);
	r->dkey = (__s64)(BPF_CORE_READ(p, se.deadline) - zero);
	r->vlag = BPF_CORE_READ(p, se.vlag);
	r->sum_w = sum_w;
	r->sum_weight = sum_weight;
	r->sum_exec = BPF_CORE_READ(p, se.sum_exec_runtime);
	r->runtime_remaining = BPF_CORE_READ(cfs, runtime_remaining);
	r->slice = BPF_CORE_READ(p, se.slice);
	r->kind = kind;
	r->tid = BPF_CORE_READ(p, pid);
	r->flags = flags;
	r->weight = (__u32)(BPF_CORE_READ(p, se.load.weight) >> 10);
	r->nice = (__s32)BPF_CORE_READ(p, static_prio) - 120;
	r->cpu = bpf_get_smp_processor_id();
	r->on_rq = BPF_CORE_READ(p, se.on_rq);
	r->delayed = BPF_CORE_READ(p, se.sched_delayed);
	r->eligible = sum_w >= r->key * sum_weight;
	r->throttled = BPF_CORE_READ(cfs, throttle_count) > 0;
	bpf_ringbuf_submit(r, 0);
}

struct snap_ctx {
	__u64 cfs;
	__u64 now;
	__u32 picked;
};

static long snap_one(void *map, __u32 *tid, __u64 *ptr, struct snap_ctx *c)
{
	struct task_struct *p = (struct task_struct *)*ptr;
	if (BPF_CORE_READ(p, pid) != *tid)
		return 0;
	if (cfs_of(p) != c->cfs || !BPF_CORE_READ(p, se.on_rq))
		return 0;
	emit(p, K_SNAP, c->picked, c->now);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(lag_wakeup, struct task_struct *p)
{
	if (ours(p))
		emit(p, K_WAKEUP, 0, bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(lag_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	int po = ours(prev), no = ours(next);
	if (po)
		emit(prev, K_SW_PREV, prev_state | (preempt ? 0x80000000u : 0), now);
	if (no) {
		emit(next, K_SW_NEXT, 0, now);
		__u64 nc = cfs_of(next);
		if (!po || cfs_of(prev) != nc) {
			struct snap_ctx c = {.cfs = nc, .now = now, .picked = BPF_CORE_READ(next, pid)};
			bpf_for_each_map_elem(&tracked, snap_one, &c, 0);
		}
	}
	return 0;
}
