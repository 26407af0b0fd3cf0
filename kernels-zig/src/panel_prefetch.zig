//! The in-kernel prefetch of the panel kernels (`panels.zig`, and the K
//! records of `k_panels.zig`): how far ahead the first token block over a
//! panel touches the records it streams (`prefetch_ahead`), the switches
//! that `cf_set_panel_prefetch` sets (`panel_prefetch`, `multi_prefetch_l2`),
//! and the helpers that issue the prefetches (`prefetchRecord`,
//! `prefetchPart`, `prefetchSeveral`).
//!
//! Compiled once per variant through `panels.zig` (the same module as
//! `kernels.zig`), which re-exports every name here: each variant object
//! holds its own copy of the two switches.

const std = @import("std");

/// How far ahead, in bytes rounded up to whole records, the first token
/// block over a panel (the one that streams it from memory; panelTokens)
/// touches the panels (PREFETCHT0 over a record per record read, within
/// the call's panels), as `k_panels.zig`'s `prefetch_records` does for the K
/// records. A 512 MB matrix of 2,048 columns, Ice Lake, best of 3 runs of 3,
/// without -> with (8 KB ahead): 1 thread Q4_0 7.9 -> 9.7 GB/s, Q8_0 8.9 ->
/// 9.7, Q5_0 6.7 -> 9.0 (the load loop: 10.3); 2 threads 14.8 -> 18.1, 12.9
/// -> 16.2, 13.0 -> 17.3. 4 KB gained less, 16 KB the same.
pub const prefetch_ahead: usize = 8192;

/// Whether a one-token block streaming a panel prefetches ahead of its reads
/// (`stream`: `prefetch_ahead` here, `prefetch_records` in k_panels.zig),
/// or leaves it to the hardware prefetchers; the first block of several
/// tokens always prefetches. Each variant object holds its own copy;
/// `cf_set_panel_prefetch` (root.zig) sets every linked one, from the CPU
/// unless told. It paid on Intel (Ice Lake: the figures above) and cost on
/// AMD: Zen 4, Qwen2.5-Coder-1.5B Q4_K_M decode at 1 thread 12.6-14.9 tok/s
/// with it, 17.7-22.1 without. Several tokens gain from it there too: a
/// speculative check's rows cost 0.05 of a decode step with the prefetch,
/// 0.22 without (docs/KERNELS.md).
pub var panel_prefetch = std.atomic.Value(bool).init(true);

/// Where the first block of several tokens over a panel prefetches:
/// PREFETCHT0 (L1) or PREFETCHT1 (L2); K records (k_panels.zig) three records
/// ahead to L1 or two to L2, the group records `prefetch_ahead` bytes ahead
/// either way. Set with `panel_prefetch` (`cf_set_panel_prefetch`), from the
/// CPU's vendor: L2 on AMD, L1 elsewhere. Zen 4, `forwardAll` of k rows, 2
/// threads, best of 15-20 over 3-4 rounds, ms: Qwen2.5-Coder-1.5B Q4_K_M, k
/// = 2, 3, 4, 6, 8 rows 35.2, 40.1, 44.7, 52.5, 58.4 to L1, 33.4, 36.0, 39.2,
/// 48.2, 52.3 to L2 (one row: 30.5); the 1B geometry Q4_0, 16.4, 18.9, 22.1,
/// 27.8, 32.1 to L1, 16.2, 15.6, 18.3, 22.7, 29.5 to L2 (one row: 13.5). The
/// L1 setting was tuned on Ice Lake, where L2 was not measured.
pub var multi_prefetch_l2 = std.atomic.Value(bool).init(false);

/// The cache level a prefetch fills.
pub const PrefetchTo = enum { l1, l2 };

/// Touches (PREFETCHT0, line by line) the record of `rec` bytes `d` records
/// after the one at r, when it lies before `end` (the end of the panels the
/// call streams).
pub inline fn prefetchRecord(comptime rec: usize, comptime d: usize, r: [*]const u8, end: [*]const u8) void {
    prefetchPart(.l1, rec, d, 1, 0, r, end);
}

/// Part `part` of `parts` of prefetchRecord's lines: a kernel that spends
/// long on a record (several tokens) spreads the record's prefetches over
/// its steps instead of issuing them in one burst.
pub inline fn prefetchPart(comptime to: PrefetchTo, comptime rec: usize, comptime d: usize, comptime parts: usize, comptime part: usize, r: [*]const u8, end: [*]const u8) void {
    if (@intFromPtr(r) + (d + 1) * rec > @intFromPtr(end)) return;
    const ahead = r + d * rec;
    const lines = comptime std.math.divCeil(usize, rec, 64) catch unreachable;
    const locality: u2 = switch (to) {
        .l1 => 3,
        .l2 => 2,
    };
    comptime var line: usize = part * lines / parts;
    inline while (line < (part + 1) * lines / parts) : (line += 1) @prefetch(ahead + line * 64, .{ .rw = .read, .locality = locality, .cache = .data });
}

/// Part `part` of `parts` of the record ahead, for the first block of
/// several tokens over a panel: to L2 `d_l2` records ahead when `to_l2`
/// (`multi_prefetch_l2`), else to L1 `d_l1` records ahead.
pub inline fn prefetchSeveral(to_l2: bool, comptime rec: usize, comptime d_l1: usize, comptime d_l2: usize, comptime parts: usize, comptime part: usize, r: [*]const u8, end: [*]const u8) void {
    if (to_l2) {
        prefetchPart(.l2, rec, d_l2, parts, part, r, end);
    } else {
        prefetchPart(.l1, rec, d_l1, parts, part, r, end);
    }
}
