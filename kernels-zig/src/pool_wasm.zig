//! `pool.zig` for the wasm32 build: no threads. A job runs on the caller,
//! all of its items in order, which is what a one-thread pool does; results
//! are identical (pool.zig: a chunk computes the same values whichever
//! thread runs it).

const std = @import("std");

pub const max_threads: u32 = 256;

pub const Job = @import("pool.zig").Job;

pub const Pool = struct {
    pub fn start(self: *Pool, n_threads: u32) !void {
        _ = self;
        std.debug.assert(n_threads >= 1 and n_threads <= max_threads);
    }

    pub fn stop(self: *Pool) void {
        _ = self;
    }

    /// Always 1: whatever count cf_init asked for, jobs run on the caller.
    pub fn threads(self: *const Pool) u32 {
        _ = self;
        return 1;
    }

    pub fn run(self: *Pool, job: Job) void {
        _ = self;
        std.debug.assert(job.chunk > 0);
        if (job.items > 0) job.run(job.ctx, 0, job.items);
    }
};
