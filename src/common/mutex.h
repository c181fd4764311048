// A mutex Clang's thread-safety analysis understands, and the attributes that tie data and
// functions to it. libstdc++'s std::mutex carries no capability attributes, so the analysis
// cannot see what a std::lock_guard holds; with Mutex and MutexLock it checks, at compile time,
// that every member marked HANGAR_GUARDED_BY(mu_) is touched only with mu_ held, that a function
// marked HANGAR_REQUIRES(mu_) is called with it held and one marked HANGAR_EXCLUDES(mu_) without.
// CI builds the tree with clang and -Wthread-safety -Werror (scripts/sanitize.sh); under g++ the
// attributes expand to nothing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define HANGAR_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define HANGAR_THREAD_ANNOTATION(x)
#endif

#define HANGAR_CAPABILITY(x) HANGAR_THREAD_ANNOTATION(capability(x))
#define HANGAR_SCOPED_CAPABILITY HANGAR_THREAD_ANNOTATION(scoped_lockable)
#define HANGAR_GUARDED_BY(x) HANGAR_THREAD_ANNOTATION(guarded_by(x))
#define HANGAR_PT_GUARDED_BY(x) HANGAR_THREAD_ANNOTATION(pt_guarded_by(x))
#define HANGAR_REQUIRES(...) HANGAR_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define HANGAR_EXCLUDES(...) HANGAR_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define HANGAR_ACQUIRE(...) HANGAR_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define HANGAR_RELEASE(...) HANGAR_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define HANGAR_TRY_ACQUIRE(...) HANGAR_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define HANGAR_RETURN_CAPABILITY(x) HANGAR_THREAD_ANNOTATION(lock_returned(x))
// For the few functions whose locking the analysis cannot follow; say why beside each use.
#define HANGAR_NO_THREAD_SAFETY_ANALYSIS HANGAR_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace hangar {

class HANGAR_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() HANGAR_ACQUIRE() { mu_.lock(); }
  void unlock() HANGAR_RELEASE() { mu_.unlock(); }
  bool try_lock() HANGAR_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope (as std::unique_lock does), and waits on condition variables
// with it. Unlock()/Lock() release and take it again inside the scope.
class HANGAR_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) HANGAR_ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() HANGAR_RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() HANGAR_RELEASE() { lock_.unlock(); }
  void Lock() HANGAR_ACQUIRE() { lock_.lock(); }

  // The mutex is held again when these return, as with std::condition_variable.
  void Wait(std::condition_variable& cv) { cv.wait(lock_); }
  template <typename Predicate>
  void Wait(std::condition_variable& cv, Predicate ready) {
    cv.wait(lock_, std::move(ready));
  }
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(std::condition_variable& cv, std::chrono::duration<Rep, Period> d, Predicate ready) {
    return cv.wait_for(lock_, d, std::move(ready));
  }
  template <typename Rep, typename Period>
  std::cv_status WaitFor(std::condition_variable& cv, std::chrono::duration<Rep, Period> d) {
    return cv.wait_for(lock_, d);
  }
  template <typename Clock, typename Duration, typename Predicate>
  bool WaitUntil(std::condition_variable& cv, std::chrono::time_point<Clock, Duration> t,
                 Predicate ready) {
    return cv.wait_until(lock_, t, std::move(ready));
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace hangar
