//! K records (`packing.zig`, "K records"): packing the Q4_K and Q6_K tiles
//! of a run into 16-row panels of one record per 256-column super-block,
//! and unpacking a row of a record back into ggml's values. packing.zig
//! holds the layout (the `k4_*` and `k6_*` offsets, `Run`) and re-exports
//! what is public here.

const std = @import("std");
const abi = @import("abi.zig");
const packing = @import("packing.zig");

const assert = std.debug.assert;
const Quant = packing.Quant;
const Run = packing.Run;
const panel_rows = packing.panel_rows;
const tile_rows = packing.tile_rows;
const tile_cols = packing.tile_cols;
const tile_header_bytes = packing.tile_header_bytes;
const blockBytes = packing.blockBytes;
const recordBytes = packing.recordBytes;
const recordsOf = packing.recordsOf;
const panelsOf = packing.panelsOf;
const tileBytes = packing.tileBytes;
const k4_d = packing.k4_d;
const k4_dmin = packing.k4_dmin;
const k4_sc = packing.k4_sc;
const k4MinAt = packing.k4MinAt;
const k4_q = packing.k4_q;
const k6_d = packing.k6_d;
const k6_sc = packing.k6_sc;
const k6_q = packing.k6_q;
const packPanel = packing.packPanel;
const unpackRow = packing.unpackRow;

/// The six-bit scale and min of sub-block j of a Q4_K block's 12 scale
/// bytes (ggml's get_scale_min_k4).
pub fn scaleMinK4(sc: []const u8, j: usize) [2]u8 {
    assert(sc.len == 12 and j < 8);
    if (j < 4) return .{ sc[j] & 63, sc[j + 4] & 63 };
    return .{ (sc[j + 4] & 0x0f) | ((sc[j - 4] >> 6) << 4), (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4) };
}

/// packPanel for the K records: tiles of a K type hold each row's one
/// super-block per 256-column tile, ggml's block whole.
pub fn packPanelK(run: *const Run, src: []const u8, m: usize, p: usize, dst: []u8) void {
    const q = run.qs[m];
    const bb = blockBytes(q);
    const rec = recordBytes(q);
    const r0 = p * panel_rows;
    const s = r0 / tile_rows;
    const tr = run.stripeRows(m, s);
    var tile_pos: usize = run.stripeOffset(m, s);
    const n_sb = recordsOf(q, run.cols);
    assert(run.cols % tile_cols == 0);
    for (0..n_sb) |sb| {
        const out = dst[sb * rec ..][0..rec];
        @memset(out, 0);
        for (0..panel_rows) |lane| {
            const r = r0 + lane;
            // Padding rows stay zero: zero scales, zero quants.
            if (r >= run.rows[m]) continue;
            const blk = src[tile_pos + tile_header_bytes + (r - s * tile_rows) * bb ..][0..bb];
            switch (q) {
                .q4_k => {
                    @memcpy(out[k4_d + lane * 2 ..][0..2], blk[0..2]);
                    @memcpy(out[k4_dmin + lane * 2 ..][0..2], blk[2..4]);
                    for (0..8) |j| {
                        const sm = scaleMinK4(blk[4..16], j);
                        out[k4_sc + j * panel_rows + lane] = sm[0];
                        out[k4MinAt(j, lane)] = sm[1];
                    }
                    for (0..4) |l| {
                        for (0..8) |c| @memcpy(out[k4_q + (l * 8 + c) * 64 + lane * 4 ..][0..4], blk[16 + 32 * l + 4 * c ..][0..4]);
                    }
                },
                .q6_k => {
                    @memcpy(out[k6_d + lane * 2 ..][0..2], blk[208..210]);
                    for (0..16) |k| out[k6_sc + k * panel_rows + lane] = blk[192 + k];
                    for (0..2) |n| {
                        for (0..8) |c| {
                            const at = k6_q + (n * 8 + c) * 3 * 64 + lane * 4;
                            @memcpy(out[at..][0..4], blk[64 * n + 4 * c ..][0..4]);
                            @memcpy(out[at + 64 ..][0..4], blk[64 * n + 32 + 4 * c ..][0..4]);
                            @memcpy(out[at + 128 ..][0..4], blk[128 + 32 * n + 4 * c ..][0..4]);
                        }
                    }
                },
                else => unreachable,
            }
        }
        tile_pos += tileBytes(q, tr, tile_cols);
    }
}

/// Dequantizes row `lane` of one K record into 256 values, as ggml does
/// (Q4_K: d sc q - dmin m; Q6_K: d sc (q - 32)).
pub fn unpackRecordK(q: Quant, record: []const u8, lane: usize, out: []f32) void {
    assert(record.len == recordBytes(q) and lane < panel_rows and out.len == 256);
    switch (q) {
        .q4_k => {
            const d = f16Of(record[k4_d + lane * 2 ..]);
            const dmin = f16Of(record[k4_dmin + lane * 2 ..]);
            for (0..256) |col| {
                const j = col / 32;
                const l = col / 64;
                const i = col % 32;
                const byte = record[k4_q + (l * 8 + i / 4) * 64 + lane * 4 + i % 4];
                const nib: u8 = if (j % 2 == 0) byte & 15 else byte >> 4;
                const sc: f32 = @floatFromInt(record[k4_sc + j * panel_rows + lane]);
                const mn: f32 = @floatFromInt(record[k4MinAt(j, lane)]);
                out[col] = (d * sc) * @as(f32, @floatFromInt(nib)) - dmin * mn;
            }
        },
        .q6_k => {
            const d = f16Of(record[k6_d + lane * 2 ..]);
            for (0..256) |col| {
                const n = col / 128;
                const quad = (col % 128) / 32;
                const i = col % 32;
                const at = k6_q + (n * 8 + i / 4) * 3 * 64 + lane * 4 + i % 4;
                const ql = record[at + (quad & 1) * 64];
                const qh = record[at + 128];
                const low: u8 = if (quad < 2) ql & 15 else ql >> 4;
                const high: u8 = (qh >> @intCast(2 * quad)) & 3;
                const v: i32 = @as(i32, low | (high << 4)) - 32;
                const sc: f32 = @floatFromInt(@as(i8, @bitCast(record[k6_sc + (col / 16) * panel_rows + lane])));
                out[col] = (d * sc) * @as(f32, @floatFromInt(v));
            }
        },
        else => unreachable,
    }
}

fn f16Of(p: []const u8) f32 {
    return abi.f16ToF32(@as(u16, p[0]) | (@as(u16, p[1]) << 8));
}

const testing = std.testing;

test "K records: packing then unpacking gives ggml's values, padding rows zero" {
    const blocks = @import("blocks.zig");
    var prng = std.Random.DefaultPrng.init(11);
    const rng = prng.random();
    inline for ([_]Quant{ .q4_k, .q6_k }) |q| {
        const b: blocks.Block = if (q == .q4_k) .q4_k else .q6_k;
        for ([_][2]usize{ .{ 16, 256 }, .{ 40, 768 }, .{ 130, 512 }, .{ 3, 256 } }) |shape| {
            const rows = shape[0];
            const cols = shape[1];
            const bb = blockBytes(q);
            const nb = cols / 256;
            const src_blocks = try testing.allocator.alloc(u8, rows * nb * bb);
            defer testing.allocator.free(src_blocks);
            rng.bytes(src_blocks);
            for (0..rows * nb) |i| {
                // Finite f16 scales.
                const at: []const usize = if (q == .q4_k) &.{ 0, 2 } else &.{208};
                for (at) |o| {
                    const h = abi.f32ToF16(rng.float(f32) + 0.01);
                    src_blocks[i * bb + o] = @truncate(h);
                    src_blocks[i * bb + o + 1] = @truncate(h >> 8);
                }
            }
            const run = Run.one(q, rows, cols);
            const src = try testing.allocator.alloc(u8, run.sourceBytes());
            defer testing.allocator.free(src);
            // Tiles: per stripe of 128 rows, per 256 columns, a header and one block per row.
            var pos: usize = 0;
            var r0: usize = 0;
            while (r0 < rows) : (r0 += tile_rows) {
                const tr = @min(tile_rows, rows - r0);
                for (0..nb) |t| {
                    @memset(src[pos..][0..tile_header_bytes], 0);
                    for (0..tr) |r| @memcpy(src[pos + tile_header_bytes + r * bb ..][0..bb], src_blocks[((r0 + r) * nb + t) * bb ..][0..bb]);
                    pos += tileBytes(q, tr, 256);
                }
            }
            try testing.expectEqual(src.len, pos);
            const dst = try testing.allocator.alloc(u8, run.packedBytes());
            defer testing.allocator.free(dst);
            for (0..panelsOf(rows)) |p| packPanel(&run, src, 0, p, dst[p * run.panelBytes(0) ..][0..run.panelBytes(0)]);
            const row = try testing.allocator.alloc(f32, cols);
            defer testing.allocator.free(row);
            var want: [256]f32 = undefined;
            for (0..rows) |r| {
                unpackRow(&run, dst, 0, r, row);
                for (0..nb) |t| {
                    blocks.dequantize(b, src_blocks[(r * nb + t) * bb ..].ptr, &want);
                    for (0..256) |c| try testing.expectEqual(want[c], row[t * 256 + c]);
                }
            }
            if (rows % panel_rows != 0) {
                const last = dst[(panelsOf(rows) - 1) * run.panelBytes(0) ..][0..run.panelBytes(0)];
                const lane = rows % panel_rows;
                try testing.expectEqual(@as(u8, 0), last[lane * 2]);
                try testing.expectEqual(@as(u8, 0), last[lane * 2 + 1]);
            }
        }
    }
}
