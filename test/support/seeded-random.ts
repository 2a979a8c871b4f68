/**
 * A small deterministic generator of numbers in [0, 1) (mulberry32), for generated test cases that a
 * failure can replay from its seed.
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One of `xs`, drawn with `r` (a `seededRandom`). */
export function picker(r: () => number): <T>(xs: readonly T[]) => T {
  return <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
}
