//! File mapping, madvise hints and aligned allocations, tracked in a fixed
//! table of regions addressed by generation-checked handles. TypeScript
//! never frees or advises a raw pointer: it names a handle, and this module
//! checks the handle, the range and the alignment before any system call.

const std = @import("std");
const abi = @import("abi.zig");

const assert = std.debug.assert;
const c = std.c;

const common = @import("handles.zig");
pub const max_regions = common.max_regions;
/// Largest allocation accepted (1 TiB): above this the request is an error,
/// not an attempt.
pub const max_alloc_bytes: usize = 1 << 40;
pub const max_alignment = common.max_alignment;
pub const max_path_bytes = common.max_path_bytes;

pub const Kind = common.Kind;

pub const Advice = common.Advice;

const Region = struct {
    kind: Kind = .free,
    generation: u32 = 0,
    /// Start of the system mapping (page aligned).
    base: usize = 0,
    /// Length of the system mapping (whole pages).
    mapped_len: usize = 0,
    /// What the caller sees: start and length (unaligned length for files).
    ptr: usize = 0,
    len: usize = 0,
    /// Plans holding raw pointers into this region; it cannot be released
    /// while any do.
    pins: u32 = 0,
    /// A mapped file stays open, so that its size and modification time can
    /// be compared with those it had when it was mapped (-1 otherwise).
    fd: c.fd_t = -1,
    file_size: i64 = 0,
    mtime_sec: i64 = 0,
    mtime_nsec: i64 = 0,
};

var regions: [max_regions]Region = [_]Region{.{}} ** max_regions;
const handles = common.Table(Region, &regions);
const handleOf = handles.handleOf;
const lookup = handles.lookup;
const claim = handles.claim;
const nextGeneration = handles.nextGeneration;
var lock: std.Thread.Mutex = .{};

fn errno() i32 {
    const e = c._errno().*;
    return if (e > 0 and e < 4096) e else 5; // EIO when errno is not usable
}

pub const View = common.View;

/// Maps a regular file read-only. Returns a handle (> 0) or a status code.
pub fn mapFile(path: []const u8, out: *View) i32 {
    if (path.len == 0 or path.len > max_path_bytes) return abi.Status.invalid_arg.code();
    if (std.mem.indexOfScalar(u8, path, 0) != null) return abi.Status.invalid_arg.code();
    var zbuf: [max_path_bytes + 1]u8 = undefined;
    @memcpy(zbuf[0..path.len], path);
    zbuf[path.len] = 0;
    const zpath: [*:0]const u8 = zbuf[0..path.len :0];

    const fd = c.open(zpath, .{ .ACCMODE = .RDONLY, .CLOEXEC = true });
    if (fd < 0) return abi.ioStatus(errno());
    var keep_fd = false;
    defer if (!keep_fd) {
        _ = c.close(fd);
    };
    var st: c.Stat = undefined;
    if (c.fstat(fd, &st) != 0) return abi.ioStatus(errno());
    if (!std.posix.S.ISREG(st.mode)) return abi.ioStatus(@intFromEnum(std.posix.E.INVAL));
    if (st.size < 0) return abi.Status.range.code();
    const size: usize = @intCast(st.size);

    lock.lock();
    defer lock.unlock();
    const index = claim() orelse return abi.Status.limit.code();
    const r = &regions[index];
    var base: usize = 0;
    var mapped_len: usize = 0;
    if (size > 0) {
        const page = std.heap.pageSize();
        mapped_len = std.mem.alignForward(usize, size, page);
        const p = c.mmap(null, size, c.PROT.READ, .{ .TYPE = .PRIVATE }, fd, 0);
        if (p == c.MAP_FAILED) return abi.ioStatus(errno());
        base = @intFromPtr(p);
        assert(base % page == 0);
    }
    const generation = nextGeneration(r);
    const mtime = st.mtime();
    r.* = .{
        .kind = .map,
        .generation = generation,
        .base = base,
        .mapped_len = mapped_len,
        .ptr = base,
        .len = size,
        .fd = fd,
        .file_size = st.size,
        .mtime_sec = mtime.sec,
        .mtime_nsec = mtime.nsec,
    };
    keep_fd = true;
    out.* = .{ .ptr = base, .len = size };
    return handleOf(index, generation);
}

/// True when the file behind a mapping no longer has the size and the
/// modification time it had when it was mapped. A truncated file would
/// raise SIGBUS on access to the pages past its new end; a rewritten one
/// would show its new bytes through the pages not yet read. Callers check
/// before they read, which narrows the window to one call: another process
/// can still truncate the file while a call reads it (docs/SECURITY.md).
fn fileChanged(r: *const Region) bool {
    assert(r.kind == .map);
    if (r.fd < 0) return false;
    var st: c.Stat = undefined;
    if (c.fstat(r.fd, &st) != 0) return true;
    const mtime = st.mtime();
    return st.size != r.file_size or mtime.sec != r.mtime_sec or mtime.nsec != r.mtime_nsec;
}

/// `ok` for a live allocation or an unchanged mapped file, `changed` for a
/// mapped file that was truncated or rewritten, `handle` otherwise.
pub fn checkFile(handle: i32) i32 {
    lock.lock();
    defer lock.unlock();
    if (lookup(handle, .alloc) != null) return abi.Status.ok.code();
    const r = lookup(handle, .map) orelse return abi.Status.handle.code();
    return if (fileChanged(r)) abi.Status.changed.code() else abi.Status.ok.code();
}

/// Allocates `len` zeroed bytes aligned to `alignment` (a power of two,
/// at most 2 MiB) from anonymous memory.
pub fn alloc(len: usize, alignment: usize, out: *View) i32 {
    if (len == 0 or len > max_alloc_bytes) return abi.Status.invalid_arg.code();
    if (!std.math.isPowerOfTwo(alignment) or alignment > max_alignment) return abi.Status.alignment.code();
    const page = std.heap.pageSize();
    const size = std.mem.alignForward(usize, len, page);
    const extra = if (alignment > page) alignment else 0;
    const total = std.math.add(usize, size, extra) catch return abi.Status.overflow.code();

    lock.lock();
    defer lock.unlock();
    const index = claim() orelse return abi.Status.limit.code();
    const p = c.mmap(null, total, c.PROT.READ | c.PROT.WRITE, .{ .TYPE = .PRIVATE, .ANONYMOUS = true }, -1, 0);
    if (p == c.MAP_FAILED) return if (errno() == 12) abi.Status.no_memory.code() else abi.ioStatus(errno());
    var base = @intFromPtr(p);
    if (extra > 0) {
        // Trim the unaligned head and the unused tail of the over-mapping.
        const aligned = std.mem.alignForward(usize, base, alignment);
        const head = aligned - base;
        const tail = total - head - size;
        if (head > 0) _ = c.munmap(@ptrFromInt(base), head);
        if (tail > 0) _ = c.munmap(@ptrFromInt(aligned + size), tail);
        base = aligned;
    }
    assert(base % alignment == 0);
    const r = &regions[index];
    const generation = nextGeneration(r);
    r.* = .{ .kind = .alloc, .generation = generation, .base = base, .mapped_len = size, .ptr = base, .len = len };
    out.* = .{ .ptr = base, .len = len };
    return handleOf(index, generation);
}

/// Unmaps a file mapping or frees an allocation. Views of it must be gone.
pub fn release(handle: i32) i32 {
    lock.lock();
    defer lock.unlock();
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse return abi.Status.handle.code();
    if (r.pins > 0) return abi.Status.busy.code();
    if (r.mapped_len > 0) {
        if (c.munmap(@ptrFromInt(r.base), r.mapped_len) != 0) return abi.ioStatus(errno());
    }
    if (r.fd >= 0) _ = c.close(r.fd);
    const generation = r.generation;
    r.* = .{ .generation = generation };
    return abi.Status.ok.code();
}

/// Applies `advice` to the pages covering [offset, offset + len) of a region.
/// The range must lie inside the region; it is widened to whole pages.
pub fn advise(handle: i32, offset: usize, len: usize, advice_raw: u32) i32 {
    const advice = std.meta.intToEnum(Advice, advice_raw) catch return abi.Status.invalid_arg.code();
    lock.lock();
    defer lock.unlock();
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse return abi.Status.handle.code();
    const end = std.math.add(usize, offset, len) catch return abi.Status.overflow.code();
    if (end > r.len) return abi.Status.range.code();
    if (len == 0) return abi.Status.ok.code();
    const page = std.heap.pageSize();
    const start = std.mem.alignBackward(usize, r.ptr + offset, page);
    const stop = @min(std.mem.alignForward(usize, r.ptr + end, page), r.base + r.mapped_len);
    assert(start >= r.base and stop > start);
    const rc = c.madvise(@ptrFromInt(start), stop - start, @intFromEnum(advice));
    if (rc != 0) return abi.ioStatus(errno());
    return abi.Status.ok.code();
}

/// Copies [offset, offset + dst.len) of a region into dst (a bounded read
/// for callers that may not hold raw pointers).
pub fn copyOut(handle: i32, offset: usize, dst: []u8) i32 {
    lock.lock();
    defer lock.unlock();
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse return abi.Status.handle.code();
    const end = std.math.add(usize, offset, dst.len) catch return abi.Status.overflow.code();
    if (end > r.len) return abi.Status.range.code();
    if (dst.len == 0) return abi.Status.ok.code();
    if (r.kind == .map and fileChanged(r)) return abi.Status.changed.code();
    const src: [*]const u8 = @ptrFromInt(r.ptr);
    @memcpy(dst, src[offset..end]);
    return abi.Status.ok.code();
}

/// The address of [offset, offset + len) of a live region, or a status code
/// (as a negative number in `err`) when the handle or the range is bad.
pub fn rangePtr(handle: i32, offset: usize, len: usize, err: *i32) ?[*]const u8 {
    lock.lock();
    defer lock.unlock();
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse {
        err.* = abi.Status.handle.code();
        return null;
    };
    const end = std.math.add(usize, offset, len) catch {
        err.* = abi.Status.overflow.code();
        return null;
    };
    if (end > r.len or len == 0) {
        err.* = abi.Status.range.code();
        return null;
    }
    if (r.kind == .map and fileChanged(r)) {
        err.* = abi.Status.changed.code();
        return null;
    }
    const base: [*]const u8 = @ptrFromInt(r.ptr);
    return base + offset;
}

/// Pins a live region for a plan: returns its address and length, or null
/// (with the status in `err`) for a bad handle.
pub fn pin(handle: i32, out: *View, err: *i32) bool {
    lock.lock();
    defer lock.unlock();
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse {
        err.* = abi.Status.handle.code();
        return false;
    };
    r.pins += 1;
    out.* = .{ .ptr = r.ptr, .len = r.len };
    return true;
}

/// Undoes one `pin`.
pub fn unpin(handle: i32) void {
    lock.lock();
    defer lock.unlock();
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse unreachable;
    assert(r.pins > 0);
    r.pins -= 1;
}

/// True for a live anonymous allocation (writable memory).
pub fn isAlloc(handle: i32) bool {
    lock.lock();
    defer lock.unlock();
    return lookup(handle, .alloc) != null;
}

/// Copies src into [offset, offset + src.len) of an allocation.
pub fn copyIn(handle: i32, offset: usize, src: []const u8) i32 {
    lock.lock();
    defer lock.unlock();
    const r = lookup(handle, .alloc) orelse return abi.Status.handle.code();
    const end = std.math.add(usize, offset, src.len) catch return abi.Status.overflow.code();
    if (end > r.len) return abi.Status.range.code();
    if (src.len == 0) return abi.Status.ok.code();
    const dst: [*]u8 = @ptrFromInt(r.ptr);
    @memcpy(dst[offset..end], src);
    return abi.Status.ok.code();
}

/// Writes the pointer and length of a live region.
pub fn view(handle: i32, out: *View) i32 {
    lock.lock();
    defer lock.unlock();
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse return abi.Status.handle.code();
    out.* = .{ .ptr = r.ptr, .len = r.len };
    return abi.Status.ok.code();
}

const testing = std.testing;

test "map, advise and release a file; stale handles are refused" {
    var tmp = testing.tmpDir(.{});
    defer tmp.cleanup();
    const data = "hello, tiles" ** 1000;
    try tmp.dir.writeFile(.{ .sub_path = "f.bin", .data = data });
    var path_buf: [std.fs.max_path_bytes]u8 = undefined;
    const path = try tmp.dir.realpath("f.bin", &path_buf);

    var v: View = undefined;
    const h = mapFile(path, &v);
    try testing.expect(h > 0);
    try testing.expectEqual(data.len, v.len);
    const bytes: [*]const u8 = @ptrFromInt(v.ptr);
    try testing.expectEqualSlices(u8, data, bytes[0..v.len]);
    try testing.expectEqual(@as(i32, 0), advise(h, 5, 100, @intFromEnum(Advice.willneed)));
    try testing.expectEqual(@as(i32, 0), advise(h, 0, data.len, @intFromEnum(Advice.dontneed)));
    try testing.expectEqualSlices(u8, data, bytes[0..v.len]); // re-faults from the file
    try testing.expectEqual(abi.Status.range.code(), advise(h, data.len, 1, 3));
    try testing.expectEqual(abi.Status.overflow.code(), advise(h, std.math.maxInt(usize), 2, 3));
    try testing.expectEqual(abi.Status.invalid_arg.code(), advise(h, 0, 1, 99));
    var part: [5]u8 = undefined;
    try testing.expectEqual(@as(i32, 0), copyOut(h, 7, &part));
    try testing.expectEqualSlices(u8, data[7..12], &part);
    try testing.expectEqual(abi.Status.range.code(), copyOut(h, data.len - 4, &part));
    try testing.expectEqual(abi.Status.overflow.code(), copyOut(h, std.math.maxInt(usize) - 1, &part));
    try testing.expectEqual(@as(i32, 0), release(h));
    try testing.expectEqual(abi.Status.handle.code(), copyOut(h, 0, &part));
    try testing.expectEqual(abi.Status.handle.code(), release(h));
    try testing.expectEqual(abi.Status.handle.code(), advise(h, 0, 1, 3));
    try testing.expectEqual(abi.Status.handle.code(), release(0));
    try testing.expectEqual(abi.Status.handle.code(), release(-5));
}

test "a mapped file truncated or rewritten afterwards is refused, not read" {
    var tmp = testing.tmpDir(.{});
    defer tmp.cleanup();
    const data = "0123456789abcdef" ** 1024;
    try tmp.dir.writeFile(.{ .sub_path = "m.bin", .data = data });
    var path_buf: [std.fs.max_path_bytes]u8 = undefined;
    const path = try tmp.dir.realpath("m.bin", &path_buf);
    var v: View = undefined;
    const h = mapFile(path, &v);
    try testing.expect(h > 0);
    defer _ = release(h);
    var part: [4]u8 = undefined;
    try testing.expectEqual(abi.Status.ok.code(), checkFile(h));
    try testing.expectEqual(abi.Status.ok.code(), copyOut(h, data.len - 4, &part));

    // Truncated by someone else: reading the last page would raise SIGBUS.
    const f = try tmp.dir.openFile("m.bin", .{ .mode = .read_write });
    defer f.close();
    try f.setEndPos(100);
    try testing.expectEqual(abi.Status.changed.code(), checkFile(h));
    try testing.expectEqual(abi.Status.changed.code(), copyOut(h, data.len - 4, &part));
    var err: i32 = 0;
    try testing.expect(rangePtr(h, 0, 4, &err) == null);
    try testing.expectEqual(abi.Status.changed.code(), err);
    // Restoring the size is not enough: the modification time moved.
    try f.setEndPos(data.len);
    try testing.expectEqual(abi.Status.changed.code(), checkFile(h));
    // A fresh mapping of the new file is fine.
    var v2: View = undefined;
    const h2 = mapFile(path, &v2);
    try testing.expect(h2 > 0);
    try testing.expectEqual(abi.Status.ok.code(), checkFile(h2));
    try testing.expectEqual(@as(i32, 0), release(h2));
    try testing.expectEqual(abi.Status.handle.code(), checkFile(h2));
}

test "mapping refuses what is not a regular file and reports errno" {
    var v: View = undefined;
    try testing.expectEqual(abi.ioStatus(2), mapFile("/nonexistent/cflow/x", &v));
    try testing.expectEqual(abi.ioStatus(22), mapFile("/proc", &v));
    try testing.expectEqual(abi.Status.invalid_arg.code(), mapFile("a\x00b", &v));
    try testing.expectEqual(abi.Status.invalid_arg.code(), mapFile("", &v));
}

test "aligned allocations" {
    for ([_]usize{ 1, 64, 4096, 65536, 2 << 20 }) |alignment| {
        var v: View = undefined;
        const h = alloc(10_000, alignment, &v);
        try testing.expect(h > 0);
        try testing.expectEqual(@as(usize, 0), v.ptr % alignment);
        const p: [*]u8 = @ptrFromInt(v.ptr);
        @memset(p[0..v.len], 0xab);
        try testing.expectEqual(@as(i32, 0), release(h));
    }
    var v: View = undefined;
    try testing.expectEqual(abi.Status.alignment.code(), alloc(10, 3, &v));
    try testing.expectEqual(abi.Status.alignment.code(), alloc(10, 4 << 20, &v));
    try testing.expectEqual(abi.Status.invalid_arg.code(), alloc(0, 64, &v));
    try testing.expectEqual(abi.Status.invalid_arg.code(), alloc(std.math.maxInt(usize), 64, &v));
}
