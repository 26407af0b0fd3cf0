//! A persistent worker pool. The calling thread (JS's, inside a synchronous
//! FFI call) takes part in every job; workers spin for a while after a job
//! and then sleep on a futex, so back-to-back kernels within a layer do not
//! pay a wake-up. No callbacks into JS ever run on a pool thread.
//!
//! A job is a range of items split into fixed chunks that threads claim with
//! an atomic counter. Which thread runs a chunk varies; what a chunk computes
//! does not, so results are identical for every thread count.

const std = @import("std");

const assert = std.debug.assert;
const Atomic = std.atomic.Value;
const Futex = std.Thread.Futex;

pub const max_threads: u32 = 256;

/// Spin iterations (each a `pause`) before an idle worker sleeps: a few
/// hundred microseconds, enough to bridge the gaps between the kernels of a
/// token without burning a core another process needs.
const spin_limit: u32 = 20_000;

pub const Job = struct {
    run: *const fn (ctx: *const anyopaque, begin: usize, end: usize) void,
    ctx: *const anyopaque,
    items: usize,
    chunk: usize,
};

pub const Pool = struct {
    workers: [max_threads - 1]std.Thread = undefined,
    n_workers: u32 = 0,
    /// Bumped for every job and for stop; idle workers wait on it.
    generation: Atomic(u32) = .init(0),
    sleepers: Atomic(u32) = .init(0),
    /// The current job's chunks: job tag (24 bits) | chunk count (20) | next chunk (20).
    ticket: Atomic(u64) = .init(0),
    /// Chunks of the current job finished; the caller waits for all of them.
    done: Atomic(u32) = .init(0),
    caller_sleeping: Atomic(u32) = .init(0),
    stopping: Atomic(bool) = .init(false),
    tag: u64 = 0,
    job: Job = undefined,

    const field_bits = 20;
    const field_mask: u64 = (1 << field_bits) - 1;
    const max_chunks: usize = field_mask;
    const tag_mask: u64 = (1 << 24) - 1;
    /// Spins of the caller waiting for the last chunks before it sleeps.
    const caller_spin_limit: u32 = 4_000;

    /// Starts `n_threads - 1` workers (the caller is the n-th thread).
    pub fn start(self: *Pool, n_threads: u32) !void {
        assert(n_threads >= 1 and n_threads <= max_threads);
        assert(self.n_workers == 0);
        self.stopping.store(false, .monotonic);
        const first_seen = self.generation.load(.monotonic);
        errdefer self.stop();
        for (0..n_threads - 1) |i| {
            self.workers[i] = try std.Thread.spawn(.{ .stack_size = 256 * 1024 }, workerMain, .{ self, first_seen });
            self.n_workers += 1;
        }
    }

    /// Stops and joins every worker. The pool can be started again.
    pub fn stop(self: *Pool) void {
        if (self.n_workers == 0) return;
        self.stopping.store(true, .release);
        _ = self.generation.fetchAdd(1, .seq_cst);
        Futex.wake(&self.generation, std.math.maxInt(u32));
        for (self.workers[0..self.n_workers]) |t| t.join();
        self.n_workers = 0;
        self.stopping.store(false, .monotonic);
    }

    pub fn threads(self: *const Pool) u32 {
        return self.n_workers + 1;
    }

    /// Runs `job` to completion. The caller takes chunks like any worker and
    /// returns as soon as every chunk is done: a worker that is not running
    /// (another process has its core) never holds the caller up, because it
    /// only claims chunks that are left.
    pub fn run(self: *Pool, job_in: Job) void {
        assert(job_in.chunk > 0);
        var job = job_in;
        if (std.math.divCeil(usize, job.items, job.chunk) catch unreachable > max_chunks) {
            job.chunk = std.math.divCeil(usize, job.items, max_chunks) catch unreachable;
        }
        const n_chunks = std.math.divCeil(usize, job.items, job.chunk) catch unreachable;
        if (n_chunks == 0) return;
        if (self.n_workers == 0 or n_chunks == 1) {
            job.run(job.ctx, 0, job.items);
            return;
        }
        assert(n_chunks <= max_chunks);
        self.job = job;
        self.done.store(0, .monotonic);
        self.tag = (self.tag + 1) & tag_mask;
        self.ticket.store((self.tag << (2 * field_bits)) | (@as(u64, n_chunks) << field_bits), .release);
        _ = self.generation.fetchAdd(1, .seq_cst);
        if (self.sleepers.load(.seq_cst) > 0) Futex.wake(&self.generation, std.math.maxInt(u32));
        self.work();
        const total: u32 = @intCast(n_chunks);
        var spins: u32 = 0;
        while (true) {
            const d = self.done.load(.seq_cst);
            if (d == total) break;
            if (spins < caller_spin_limit) {
                spins += 1;
                std.atomic.spinLoopHint();
                continue;
            }
            self.caller_sleeping.store(1, .seq_cst);
            if (self.done.load(.seq_cst) != total) Futex.wait(&self.done, d);
            self.caller_sleeping.store(0, .seq_cst);
        }
    }

    /// Claims and runs chunks of the current job until none are left.
    fn work(self: *Pool) void {
        var guard: usize = 0;
        while (guard <= max_chunks) : (guard += 1) {
            const t = self.ticket.load(.acquire);
            const n = (t >> field_bits) & field_mask;
            const next = t & field_mask;
            if (next >= n) return;
            if (self.ticket.cmpxchgWeak(t, t + 1, .acq_rel, .monotonic) != null) continue;
            // Chunk `next` is ours; the job cannot change until it is done.
            const job = self.job;
            const begin = next * job.chunk;
            const end = @min(job.items, begin + job.chunk);
            job.run(job.ctx, begin, end);
            const finished = self.done.fetchAdd(1, .seq_cst) + 1;
            if (finished == n and self.caller_sleeping.load(.seq_cst) == 1) Futex.wake(&self.done, 1);
        }
        unreachable; // a job has at most max_chunks chunks
    }

    fn workerMain(self: *Pool, first_seen: u32) void {
        var seen = first_seen;
        while (true) {
            var spins: u32 = 0;
            while (true) {
                const g = self.generation.load(.acquire);
                if (g != seen) {
                    seen = g;
                    break;
                }
                if (spins < spin_limit) {
                    spins += 1;
                    std.atomic.spinLoopHint();
                    continue;
                }
                _ = self.sleepers.fetchAdd(1, .seq_cst);
                Futex.wait(&self.generation, seen);
                _ = self.sleepers.fetchSub(1, .seq_cst);
            }
            if (self.stopping.load(.acquire)) return;
            self.work();
        }
    }
};

const testing = std.testing;

const SumCtx = struct {
    out: []u64,
    fn run(ctx: *const anyopaque, begin: usize, end: usize) void {
        const self: *const SumCtx = @ptrCast(@alignCast(ctx));
        for (begin..end) |i| self.out[i] = i * i + 1;
    }
};

test "every item is computed once for every thread count, repeatedly" {
    var out: [1000]u64 = undefined;
    for ([_]u32{ 1, 2, 3, 8 }) |n| {
        var pool: Pool = .{};
        try pool.start(n);
        defer pool.stop();
        try testing.expectEqual(n, pool.threads());
        for (0..200) |round| {
            @memset(&out, 0);
            const ctx = SumCtx{ .out = &out };
            pool.run(.{ .run = SumCtx.run, .ctx = &ctx, .items = out.len, .chunk = 1 + round % 37 });
            for (out, 0..) |v, i| try testing.expectEqual(i * i + 1, v);
        }
    }
}

test "workers that went to sleep wake for the next job" {
    var pool: Pool = .{};
    try pool.start(2);
    defer pool.stop();
    var out: [64]u64 = undefined;
    const ctx = SumCtx{ .out = &out };
    for (0..3) |_| {
        std.time.sleep(20 * std.time.ns_per_ms); // long enough for workers to sleep
        @memset(&out, 0);
        pool.run(.{ .run = SumCtx.run, .ctx = &ctx, .items = out.len, .chunk = 4 });
        for (out, 0..) |v, i| try testing.expectEqual(i * i + 1, v);
    }
}
