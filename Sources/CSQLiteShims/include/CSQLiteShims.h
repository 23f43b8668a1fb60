#ifndef C_SQLITE_SHIMS_H
#define C_SQLITE_SHIMS_H

/// The name of the read-only VFS `tp_sqlite_register_descriptor_vfs` registers.
#define TP_SQLITE_DESCRIPTOR_VFS "tourpack-descriptor"

/// Registers, once, a read-only SQLite VFS that reads a database from an
/// open descriptor: a main database named `/descriptor/<n>` (in a URI, with
/// `vfs=tourpack-descriptor`) is read with pread(2) from a dup(2) of
/// descriptor n, made when SQLite opens it, so the caller may close n as
/// soon as the open returns. Its path never reaches SQLite, whose unix VFS
/// resolves every name to at most 512 bytes; no journal, WAL or lock file
/// is looked for or created (the file reports itself immutable). Other files
/// (temporary ones) go to the default VFS. Returns an SQLite result code.
int tp_sqlite_register_descriptor_vfs(void);

/// Interrupts every statement of `connection` (an sqlite3 *) that runs past
/// `milliseconds` from now, with SQLITE_INTERRUPT; 0 or less removes the limit.
void tp_sqlite_set_time_limit(void *connection, long long milliseconds);

/// Sets the longest string or blob `connection` (an sqlite3 *) will read or
/// make, in bytes (SQLITE_LIMIT_LENGTH): a longer value fails with
/// SQLITE_TOOBIG instead of being allocated.
void tp_sqlite_limit_length(void *connection, int bytes);

#endif
