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

/// Spin iterations (each a `pause`) before a worker sleeps: about a
/// millisecond on current x86 cores.
const spin_limit: u32 = 50_000;

pub const Job = struct {
    run: *const fn (ctx: *const anyopaque, begin: usize, end: usize) void,
    ctx: *const anyopaque,
    items: usize,
    chunk: usize,
};

pub const Pool = struct {
    workers: [max_threads - 1]std.Thread = undefined,
    n_workers: u32 = 0,
    generation: Atomic(u32) = .init(0),
    sleepers: Atomic(u32) = .init(0),
    remaining: Atomic(u32) = .init(0),
    next_chunk: Atomic(usize) = .init(0),
    stopping: Atomic(bool) = .init(false),
    job: Job = undefined,
    n_chunks: usize = 0,

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

    /// Runs `job` to completion on every thread of the pool.
    pub fn run(self: *Pool, job: Job) void {
        assert(job.chunk > 0);
        const n_chunks = std.math.divCeil(usize, job.items, job.chunk) catch unreachable;
        if (n_chunks == 0) return;
        if (self.n_workers == 0 or n_chunks == 1) {
            job.run(job.ctx, 0, job.items);
            return;
        }
        self.job = job;
        self.n_chunks = n_chunks;
        self.next_chunk.store(0, .monotonic);
        self.remaining.store(self.n_workers, .monotonic);
        _ = self.generation.fetchAdd(1, .seq_cst);
        if (self.sleepers.load(.seq_cst) > 0) Futex.wake(&self.generation, std.math.maxInt(u32));
        self.work();
        var spins: u32 = 0;
        while (self.remaining.load(.acquire) != 0) {
            if (spins < spin_limit) {
                spins += 1;
                std.atomic.spinLoopHint();
            } else {
                std.Thread.yield() catch {};
            }
        }
    }

    fn work(self: *Pool) void {
        const job = self.job;
        var guard: usize = 0;
        while (guard <= self.n_chunks) : (guard += 1) {
            const c = self.next_chunk.fetchAdd(1, .monotonic);
            if (c >= self.n_chunks) return;
            const begin = c * job.chunk;
            const end = @min(job.items, begin + job.chunk);
            job.run(job.ctx, begin, end);
        }
        unreachable; // each call claims at most n_chunks chunks
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
            _ = self.remaining.fetchSub(1, .release);
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
