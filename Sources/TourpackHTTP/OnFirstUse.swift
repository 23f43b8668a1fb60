import Foundation

/// A value made by its first use, once, whichever thread asks first.
///
/// For machinery a run may never need: a build whose every chunk and tile
/// is cached sends no request, so it should start no transfer thread, no
/// decode pool and not libcurl itself. `made` reads the value without
/// making it, so an owner's `deinit` stops only what was started.
///
/// `make` runs under the lock, so it must be quick and must not wait on
/// anything that could need this value (starting a thread is fine).
package final class OnFirstUse<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private let make: @Sendable () -> Value
    // Guarded by `lock`:
    private var stored: Value?

    package init(_ make: @escaping @Sendable () -> Value) {
        self.make = make
    }

    /// The value, made now when this is its first use.
    package var value: Value {
        lock.withLock {
            if let stored { return stored }
            let made = make()
            stored = made
            return made
        }
    }

    /// The value if a use has made it; nil otherwise, and nothing is made.
    package var made: Value? { lock.withLock { stored } }
}
