// SPDX-License-Identifier: MIT OR Apache-2.0
// proctrace: run/wait transitions of a followed set of tasks, for os::proctrace.
//
// User space puts the task ids to follow into `follow`; a task forked by a followed task is
// followed too (sched_process_fork), an exiting one is dropped (sched_process_exit). Every
// transition of a followed task goes to the ring buffer `events`:
//   sched_wakeup / sched_wakeup_new  -> READY  (it left a wait)
//   sched_switch, next followed      -> RUN
//   sched_switch, prev followed      -> WAIT (it blocked) or PREEMPT (still runnable)
// The program decides nothing: classification and levers live in user space.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

// Kinds of event (mirrored in crates/os/src/proctrace/bpf.rs).
#define EV_READY 0
#define EV_RUN 1
#define EV_WAIT 2
#define EV_PREEMPT 3
#define EV_FORK 4
#define EV_EXIT 5

struct event {
	__u64 t;    // bpf_ktime_get_ns (CLOCK_MONOTONIC)
	__u32 tid;  // the task (kernel pid)
	__u32 tgid; // its process
	__u32 kind; // EV_*
	__u32 aux;  // EV_FORK: the parent's tid; else the CPU
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} follow SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

// [0]: events dropped because the ring buffer was full.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

static __always_inline int followed(__u32 tid)
{
	return bpf_map_lookup_elem(&follow, &tid) != 0;
}

static __always_inline void emit(__u32 tid, __u32 tgid, __u32 kind, __u32 aux)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__u32 zero = 0;
		__u64 *d = bpf_map_lookup_elem(&dropped, &zero);
		if (d)
			__sync_fetch_and_add(d, 1);
		return;
	}
	e->t = bpf_ktime_get_ns();
	e->tid = tid;
	e->tgid = tgid;
	e->kind = kind;
	e->aux = aux;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void woken(struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	if (followed(tid))
		emit(tid, BPF_CORE_READ(p, tgid), EV_READY, bpf_get_smp_processor_id());
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	woken(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	woken(p);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 cpu = bpf_get_smp_processor_id();
	__u32 ptid = BPF_CORE_READ(prev, pid);
	__u32 ntid = BPF_CORE_READ(next, pid);
	if (followed(ptid))
		emit(ptid, BPF_CORE_READ(prev, tgid),
		     (preempt || prev_state == 0) ? EV_PREEMPT : EV_WAIT, cpu);
	if (followed(ntid))
		emit(ntid, BPF_CORE_READ(next, tgid), EV_RUN, cpu);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptid = BPF_CORE_READ(parent, pid);
	if (!followed(ptid))
		return 0;
	__u32 ctid = BPF_CORE_READ(child, pid);
	__u8 one = 1;
	bpf_map_update_elem(&follow, &ctid, &one, BPF_ANY);
	emit(ctid, BPF_CORE_READ(child, tgid), EV_FORK, ptid);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	if (!followed(tid))
		return 0;
	bpf_map_delete_elem(&follow, &tid);
	emit(tid, BPF_CORE_READ(p, tgid), EV_EXIT, bpf_get_smp_processor_id());
	return 0;
}
