//! How a plan's matmul is cut among the pool's threads: panels per claim
//! for one token (long sequential streams, `streamChunk`) and for several
//! (even shares, `panelChunk`), and the pool jobs that run a packed run's
//! panels or a tiled run's stripes over a batch (`MatCtx`).

const std = @import("std");
const abi = @import("abi.zig");
const plan = @import("plan.zig");
const packing = @import("packing.zig");
const check = @import("plan_check.zig");

const assert = std.debug.assert;
const Exec = plan.Exec;
const Run = plan.Run;
const stripeOffsetOf = check.stripeOffsetOf;

/// Panels per claim of a one-token packed matmul (decode: every weight
/// streamed from memory once): two claims per thread, each one long
/// sequential stream, at least `panelChunk`'s. Claims of 6-10 panels cost
/// a one-token step at 2 threads 19-20% on SmolLM2-135M Q4_0, 5-10% on
/// Gemma 3 270M, 3-7% on the Llama-3.2-1B geometry (Zen 4, `avx2` and
/// `avx512vnni`, the two alternated every 8 steps in one process): each
/// claim starts a stream the prefetchers must pick up again, and the output
/// head's thousands of panels made hundreds of claims a token. Smaller
/// claims only for the tail measured 9% slower, not faster. Two per thread,
/// not one, so that a thread the host deschedules leaves work to take.
pub fn streamChunk(panels: usize, threads: usize) usize {
    assert(panels > 0 and threads > 0);
    return @max(panelChunk(panels, threads), std.math.divCeil(usize, panels, 2 * threads) catch unreachable);
}

test "streamChunk: two long claims per thread, never shorter than panelChunk's" {
    // SmolLM2-135M at 2 threads: qkv 60, o and down 36, gate/up 192, the
    // output head 3072 panels.
    try std.testing.expectEqual(@as(usize, 15), streamChunk(60, 2));
    try std.testing.expectEqual(@as(usize, 9), streamChunk(36, 2));
    try std.testing.expectEqual(@as(usize, 48), streamChunk(192, 2));
    try std.testing.expectEqual(@as(usize, 768), streamChunk(3072, 2));
    // One thread: the whole matrix in two claims; many threads on a small
    // matrix: panelChunk's floor.
    try std.testing.expectEqual(@as(usize, 30), streamChunk(60, 1));
    try std.testing.expectEqual(@as(usize, panelChunk(36, 16)), streamChunk(36, 16));
    for (1..300) |panels| {
        for (1..17) |threads| {
            const c = streamChunk(panels, threads);
            try std.testing.expect(c >= panelChunk(panels, threads));
            try std.testing.expect(std.math.divCeil(usize, panels, c) catch unreachable <= 2 * threads);
        }
    }
}

/// Panels per claim of a packed matmul over `panels` panels on `threads`
/// threads (several tokens: compute, not the stream, sets the pace, so
/// short claims even the threads out): from 6 to 10 (about one 8-panel
/// source stripe, sequential runs the prefetchers follow), the one whose
/// busiest thread gets the fewest panels when threads claim in turn, the
/// longer chunk on a tie. 8 panels cut SmolLM2's 36-panel `o` and `down`
/// into 8+8+8+8+4, one thread doing 20 panels to the other's 16; 9 gives
/// 18 each.
pub fn panelChunk(panels: usize, threads: usize) usize {
    if (threads <= 1 or panels == 0) return 8;
    var best: usize = 8;
    var best_load = busiestShare(panels, 8, threads);
    var c: usize = 6;
    while (c <= 10) : (c += 1) {
        const load = busiestShare(panels, c, threads);
        if (load < best_load or (load == best_load and c > best)) {
            best = c;
            best_load = load;
        }
    }
    return best;
}

/// Panels the busiest of `threads` threads computes when chunk i of
/// ceil(panels / chunk) goes to thread i % threads (the last chunk holding
/// what is left).
fn busiestShare(panels: usize, chunk: usize, threads: usize) usize {
    assert(panels > 0 and chunk > 0 and threads > 0);
    const n = std.math.divCeil(usize, panels, chunk) catch unreachable;
    if (threads == 1) return panels;
    const q = n / threads;
    const r = n % threads;
    const last = panels - (n - 1) * chunk;
    // The last chunk goes to thread (n - 1) % threads: with r == 0 that
    // thread still has q chunks like every other, and others have them full.
    if (r == 0) return q * chunk;
    if (r == 1) return q * chunk + last; // thread 0 alone holds one more, the last
    return (q + 1) * chunk; // threads 0..r-1 hold q + 1 chunks, thread 0 all full
}

test "panelChunk evens the threads' shares of a matmul" {
    // SmolLM2's o/down (36 panels), qkv (60), gate/up (192); Gemma 3 270M's
    // 40; Qwen2.5-0.5B's 56.
    try std.testing.expectEqual(@as(usize, 9), panelChunk(36, 2));
    try std.testing.expectEqual(@as(usize, 18), busiestShare(36, 9, 2));
    try std.testing.expectEqual(@as(usize, 20), busiestShare(36, 8, 2));
    try std.testing.expectEqual(@as(usize, 30), busiestShare(60, panelChunk(60, 2), 2));
    try std.testing.expectEqual(@as(usize, 8), panelChunk(192, 2));
    try std.testing.expectEqual(@as(usize, 20), busiestShare(40, panelChunk(40, 2), 2));
    try std.testing.expectEqual(@as(usize, 28), busiestShare(56, panelChunk(56, 2), 2));
    try std.testing.expectEqual(@as(usize, 8), panelChunk(36, 1));
    // busiestShare against the round-robin it describes, for every case here.
    for (1..200) |panels| {
        for (1..9) |threads| {
            const c = panelChunk(panels, threads);
            try std.testing.expect(c >= 6 and c <= 10);
            var load = [_]usize{0} ** 8;
            var p: usize = 0;
            var i: usize = 0;
            while (p < panels) : (i += 1) {
                const take = @min(c, panels - p);
                load[i % threads] += take;
                p += take;
            }
            try std.testing.expectEqual(std.mem.max(usize, load[0..threads]), busiestShare(panels, c, threads));
        }
    }
}

/// A matmul of a batch: y = W in for `n_tok` rows, as pool jobs over
/// panels (`packedRun`) or stripes (`tilesRun`).
pub const MatCtx = struct {
    ex: *const Exec,
    r: *const Run,
    in: [*]const u8,
    in_stride: usize,
    y: [*]f32,
    y_stride: usize,
    n_tok: usize,

    pub fn packedRun(raw: *const anyopaque, begin: usize, end: usize) void {
        const self: *const MatCtx = @ptrCast(@alignCast(raw));
        const r = self.r;
        const ng = packing.groupsOf(r.layout.cols);
        var p = begin;
        while (p < end) {
            // The member holding panel p, and how many of [p, end) it holds.
            var m: usize = 0;
            while (r.panel_off[m + 1] <= p) m += 1;
            const stop = @min(end, r.panel_off[m + 1]);
            const local = p - r.panel_off[m];
            const rows = @min(r.layout.rows[m] - local * 16, (stop - p) * 16);
            const panels = r.base + r.layout.packedOffset(m) + local * r.layout.panelBytes(m);
            self.ex.env.t.packed_panels(@intFromEnum(r.layout.qs[m]), panels, stop - p, ng, self.in, self.in_stride, self.n_tok, self.y + r.row_off[m] + local * 16, self.y_stride, rows);
            p = stop;
        }
    }

    pub fn tilesRun(raw: *const anyopaque, begin: usize, end: usize) void {
        const self: *const MatCtx = @ptrCast(@alignCast(raw));
        const r = self.r;
        const l = &r.layout;
        const ng = packing.groupsOf(l.cols);
        for (begin..end) |s| {
            for (0..l.n_members) |m| {
                if (s >= l.stripes(m)) continue;
                const off = stripeOffsetOf(r, m, s);
                const r0 = s * packing.tile_rows;
                const tr: usize = @min(packing.tile_rows, l.rows[m] - r0);
                const t = r.types[m];
                switch (t) {
                    .q4_0, .q8_0, .f32 => for (0..self.n_tok) |tok| {
                        const xin = self.in + tok * self.in_stride;
                        const y = self.y + tok * self.y_stride + r.row_off[m] + r0;
                        if (t == .f32) {
                            self.ex.env.t.tile_stripe(3, r.base + off, tr, l.cols, @ptrFromInt(@alignOf(abi.BlockQ8_0)), 0, @ptrCast(@alignCast(xin)), l.cols, y);
                        } else {
                            self.ex.env.t.tile_stripe(@intFromEnum(t), r.base + off, tr, l.cols, @ptrCast(xin), ng, @ptrFromInt(@alignOf(f32)), 0, y);
                        }
                    },
                    // The other types decode each weight once for all the tokens.
                    else => self.ex.env.t.block_stripe(@intFromEnum(t), r.base + off, tr, l.cols, self.in, self.in_stride, self.n_tok, self.y + r.row_off[m] + r0, self.y_stride),
                }
            }
        }
    }
};
