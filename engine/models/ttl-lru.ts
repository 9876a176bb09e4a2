// A small LRU map whose entries also expire a fixed time after they were set.

export class TtlLru<K, V> {
  private readonly entries = new Map<K, { value: V; expires: number }>();

  constructor(
    private readonly capacity: number,
    private readonly ttlMs: number,
    /** Called for every entry that leaves the map (evicted, expired, replaced or deleted). */
    private readonly onDrop: (key: K, value: V) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expires <= this.now()) {
      this.onDrop(key, entry.value);
      return undefined;
    }
    this.entries.set(key, entry);
    return entry.value;
  }

  set(key: K, value: V): void {
    this.delete(key);
    this.entries.set(key, { value, expires: this.now() + this.ttlMs });
    while (this.entries.size > this.capacity) {
      const [oldest, entry] = this.entries.entries().next().value as [K, { value: V }];
      this.entries.delete(oldest);
      this.onDrop(oldest, entry.value);
    }
  }

  delete(key: K): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.onDrop(key, entry.value);
  }

  get size(): number {
    return this.entries.size;
  }

  clear(): void {
    for (const key of [...this.entries.keys()]) this.delete(key);
  }
}
