/**
 * Calls under way, by key: whoever asks for a key while a call for it runs gets that call's
 * promise, its answer or its failure, instead of making the call again. Nothing is kept once the
 * call settles, so the next ask after it makes a fresh one.
 */
export class SingleFlight<K, V> {
  private readonly running = new Map<K, Promise<V>>();

  run(key: K, call: () => Promise<V>): Promise<V> {
    const under = this.running.get(key);
    if (under !== undefined) return under;
    const started = call();
    // A call forgotten by clear() must not remove the one started after it under the same key.
    // Its failure is every caller's, each of which awaits it: handled there.
    const done = () => {
      if (this.running.get(key) === started) this.running.delete(key);
    };
    started.then(done, done);
    this.running.set(key, started);
    return started;
  }

  /** Forgets every call under way: asks from now on start their own. */
  clear(): void {
    this.running.clear();
  }
}
