//! Packing a tiled run into 16-row panels at load (`packing.zig` knows the
//! bytes; this runs it on the pool, stripe by stripe, dropping the source
//! pages as they are packed).

const std = @import("std");
const abi = @import("abi.zig");
const plan = @import("plan.zig");
const packing = @import("packing.zig");
const check = @import("plan_check.zig");
const is_wasm = @import("builtin").cpu.arch == .wasm32;
const memory = if (is_wasm) @import("memory_wasm.zig") else @import("memory.zig");

const assert = std.debug.assert;
const Status = abi.Status;
const Env = plan.Env;
const Error = plan.Error;
const Run = plan.Run;
const add = plan.add;
const word64 = plan.word64;
const statusOf = plan.statusOf;
const checkRun = check.checkRun;

const PackCtx = struct {
    layout: *const packing.Run,
    src: []const u8,
    dst: []u8,
    panel_off: [packing.max_members + 1]usize,
    /// When set, the source handle and offset whose pages to drop as each
    /// chunk (one 128-row stripe of a one-matrix run) is packed.
    evict_handle: i32,
    src_offset: usize,

    const chunk_panels = packing.tile_rows / packing.panel_rows;
    /// How far before a packed stripe its eviction reaches (see `run`): more
    /// than a fault-around window and a 2 MiB folio.
    const evict_back: usize = 4 << 20;

    fn run(raw: *const anyopaque, begin: usize, end: usize) void {
        const self: *const PackCtx = @ptrCast(@alignCast(raw));
        const l = self.layout;
        // One stripe at a time, its source pages dropped as soon as it is
        // packed: a call may cover the whole run (one thread, or the pool
        // busy), which had held a whole second copy of the largest matrix
        // (the 1.5B's 191 MB embedding: +177 MiB peak RSS at 1 thread).
        if (self.evict_handle != 0) {
            // Chunks are whole stripes of one matrix: a contiguous source range.
            assert(begin % chunk_panels == 0 and self.layout.n_members == 1);
        }
        var b = begin;
        while (b < end) {
            const e = @min(end, (b / chunk_panels + 1) * chunk_panels);
            for (b..e) |p| {
                var m: usize = 0;
                while (self.panel_off[m + 1] <= p) m += 1;
                const local = p - self.panel_off[m];
                const pb = l.panelBytes(m);
                packing.packPanel(l, self.src, m, local, self.dst[l.packedOffset(m) + local * pb ..][0..pb]);
            }
            if (self.evict_handle != 0) {
                const s = b / chunk_panels;
                const to = if (s + 1 >= self.layout.stripes(0)) self.src.len else self.layout.stripeOffset(0, s + 1);
                // Back to evict_back before the stripe: the first fault in a
                // stripe maps its fault-around window (and large folios)
                // around the address, pages of stripes already packed and
                // dropped among them. Dropping the stripe alone left those
                // mapped until the run's end: 11 MB of SmolLM2's 30 MB
                // embedding (its peak RSS) at one thread.
                const from = self.layout.stripeOffset(0, s) -| evict_back;
                _ = memory.advise(self.evict_handle, self.src_offset + from, to - from, @intFromEnum(memory.Advice.dontneed));
            }
            b = e;
        }
    }
};

/// Packs the tiled run described by `run_words` (kind tiles_q4_0/q8_0, or
/// tiles whose members each have a panel type, `Run.packable`) into
/// [dst_offset, dst_offset + packed length) of allocation `dst_handle`. With
/// `evict`, the source pages are dropped (MADV_DONTNEED) as they are packed,
/// stripe by stripe for a one-matrix run and at the end for a fused one, so
/// that packing never holds a whole second copy of a large matrix.
pub fn pack(env: Env, run_in: []const u32, dst_handle: i32, dst_offset: usize, dst_len: usize, evict: bool) i32 {
    return packInner(env, run_in, dst_handle, dst_offset, dst_len, evict) catch |e| statusOf(e);
}

fn packInner(env: Env, run_in: []const u32, dst_handle: i32, dst_offset: usize, dst_len: usize, evict: bool) Error!i32 {
    var r: Run = undefined;
    try checkRun(run_in, &r);
    defer memory.unpin(r.handle);
    if (memory.checkFile(r.handle) == Status.changed.code()) return error.Changed;
    if (!r.packable) return error.InvalidArg;
    if (dst_len != r.layout.packedBytes()) return error.Length;
    if (!memory.isAlloc(dst_handle)) return error.Handle;
    var view: memory.View = undefined;
    var err: i32 = 0;
    if (!memory.pin(dst_handle, &view, &err)) return error.Handle;
    defer memory.unpin(dst_handle);
    if (try add(dst_offset, dst_len) > view.len) return error.Range;
    const dst = @as([*]u8, @ptrFromInt(view.ptr))[dst_offset..][0..dst_len];
    const src_offset = word64(run_in[2], run_in[3]);
    const stripewise = evict and r.layout.n_members == 1;
    var ctx = PackCtx{
        .layout = &r.layout,
        .src = r.base[0..r.len],
        .dst = dst,
        .panel_off = r.panel_off,
        .evict_handle = if (stripewise) r.handle else 0,
        .src_offset = src_offset,
    };
    env.run(.{ .run = PackCtx.run, .ctx = &ctx, .items = r.panel_off[r.layout.n_members], .chunk = PackCtx.chunk_panels });
    // Once more over the whole run: fault-around may have mapped pages of a
    // stripe back in while a neighbouring one was read.
    if (evict) _ = memory.advise(r.handle, src_offset, r.len, @intFromEnum(memory.Advice.dontneed));
    return Status.ok.code();
}
