//! Plans: a `gated` or `quantize` operation on one row, cut into slices of
//! its elements that the pool's threads share (`SliceCtx`), with the
//! quantization of the gated output that may follow it in the same job.
//! plan_exec.zig's executor runs it for an operation of one row (decode);
//! plan_rows.zig holds the row-by-row operations (RowCtx) and `Flag`.

const std = @import("std");
const abi = @import("abi.zig");
const plan = @import("plan.zig");
const packing = @import("packing.zig");
const act_q8_k = @import("act_q8_k.zig");

const assert = std.debug.assert;
const qk = abi.qk;
const ActRow = packing.ActRow;
const Exec = plan.Exec;
const Op = plan.Op;
const quantizeGroups = plan.quantizeGroups;
const Flag = @import("plan_rows.zig").Flag;

/// A `gated` or `quantize` operation on one row split into slices of
/// `slice` elements for the pool, and optionally (`then`) the `quantize` or
/// `quantize_k` of the gated output that follows it, slice by slice in the
/// same job: one claim and one wait where there were two. Both are
/// elementwise (quantize per group of 32 or 256, which a slice holds whole),
/// so every element gets the arithmetic it gets unsplit: results are the
/// same for every thread count and as RowCtx's.
pub const SliceCtx = struct {
    ex: *const Exec,
    w: []const u32,
    t: usize,
    /// The quantization of `w`'s output that runs in the same job, if any
    /// (`fusesWith`).
    then: ?[]const u32 = null,
    failed: Flag = .init(false),

    /// Elements per slice: a multiple of every variant's vector width and of
    /// the 32- and 256-value groups, large enough to outweigh claiming it.
    pub const slice: usize = 1024;
    comptime {
        assert(slice % qk == 0 and slice % act_q8_k.qk_k == 0 and slice % 16 == 0);
    }

    /// Elements of the operation's row (the slices cover them).
    pub fn elements(self: *const SliceCtx) usize {
        return elementsOf(self.w);
    }

    fn elementsOf(w: []const u32) usize {
        const a = w[2..];
        return switch (@as(Op, @enumFromInt(w[0]))) {
            .gated => a[5],
            .quantize, .quantize_k => a[2],
            else => unreachable,
        };
    }

    /// Whether `next` quantizes exactly what the `gated` operation `w`
    /// writes (same buffer, stride, length and rows), so that both can run
    /// slice by slice in one job for row t. Not when the quantized row
    /// would overlap the gated input row: one thread's quants could then
    /// land on what another's gate slice has yet to read.
    pub fn fusesWith(w: []const u32, next: []const u32, t: usize) bool {
        if (w[0] != @intFromEnum(Op.gated)) return false;
        if (next[0] != @intFromEnum(Op.quantize) and next[0] != @intFromEnum(Op.quantize_k)) return false;
        const g = w[2..];
        const q = next[2..];
        if (!(w[1] == next[1] and q[0] == g[3] and q[1] == g[4] and q[2] == g[5])) return false;
        // Offsets and sizes were checked when the plan was built: no overflow.
        const n: usize = g[5];
        const gu_lo = @as(usize, g[1]) + @as(usize, g[2]) * t;
        const gu_hi = gu_lo + 2 * n * @sizeOf(f32);
        const q_lo = @as(usize, q[3]) + @as(usize, q[4]) * t;
        const q_hi = q_lo + ActRow.bytes(n / qk);
        return q_hi <= gu_lo or gu_hi <= q_lo;
    }

    /// The pool's job: slices [begin, end) of the row.
    pub fn run(raw: *const anyopaque, begin: usize, end: usize) void {
        const self: *const SliceCtx = @ptrCast(@alignCast(raw));
        self.slices(self.w, begin, end);
        if (self.then) |w| self.slices(w, begin, end);
    }

    fn slices(self: *const SliceCtx, w: []const u32, begin: usize, end: usize) void {
        const ex = self.ex;
        const k = ex.env.t;
        const a = w[2..];
        const n = elementsOf(w);
        const e0 = begin * slice;
        const e1 = @min(n, end * slice);
        assert(e0 < e1);
        switch (@as(Op, @enumFromInt(w[0]))) {
            .gated => {
                const gu = ex.f32s(a[1], a[2], self.t, 2 * n);
                const out = ex.f32s(a[3], a[4], self.t, n);
                const len = e1 - e0;
                if (a[0] == 0) k.silu_mul(gu[e0..].ptr, gu[n + e0 ..].ptr, out[e0..].ptr, len) else k.gelu_mul(gu[e0..].ptr, gu[n + e0 ..].ptr, out[e0..].ptr, len);
            },
            .quantize => {
                if (!quantizeGroups(k, ex.f32s(a[0], a[1], self.t, n), ex.bytesAt(a[3], a[4], self.t), e0 / qk, std.math.divCeil(usize, e1, qk) catch unreachable)) {
                    @constCast(self).failed.store(true, .release);
                }
            },
            .quantize_k => {
                const kk = act_q8_k.qk_k;
                if (!act_q8_k.quantizeSuperBlocks(ex.f32s(a[0], a[1], self.t, n), ex.bytesAt(a[3], a[4], self.t), e0 / kk, std.math.divCeil(usize, e1, kk) catch unreachable)) {
                    @constCast(self).failed.store(true, .release);
                }
            },
            else => unreachable,
        }
    }
};

test "SliceCtx.fusesWith: a gated output's own quantization, away from the gate's input" {
    const gated = @intFromEnum(Op.gated);
    const quantize = @intFromEnum(Op.quantize);
    // gated: kind, gu, gu_stride, out, out_stride, n; quantize: x, x_stride, n, q, q_stride.
    const w = [_]u32{ gated, 0, 0, 0, 16384, 16384, 8192, 1536, 0, 0, 0, 0, 0, 0, 0, 0 };
    const q = [_]u32{ quantize, 0, 16384, 8192, 1536, 32768, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    try std.testing.expect(SliceCtx.fusesWith(&w, &q, 0));
    // Another buffer, length, stride or row flag: no.
    var other = q;
    other[2] = 20000;
    try std.testing.expect(!SliceCtx.fusesWith(&w, &other, 0));
    other = q;
    other[4] = 1024;
    try std.testing.expect(!SliceCtx.fusesWith(&w, &other, 0));
    other = q;
    other[1] = 1;
    try std.testing.expect(!SliceCtx.fusesWith(&w, &other, 0));
    // Quants written over the gate's input row: no.
    other = q;
    other[5] = 4096;
    try std.testing.expect(!SliceCtx.fusesWith(&w, &other, 0));
    // Not a gated operation first: no.
    try std.testing.expect(!SliceCtx.fusesWith(&q, &q, 0));
}
