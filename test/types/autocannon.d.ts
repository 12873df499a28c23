// The part of autocannon (a devDependency without types of its own) that the tests use.
declare module 'autocannon' {
  interface Histogram {
    readonly average: number;
    readonly total: number;
    readonly p99: number;
  }
  interface Result {
    readonly requests: Histogram;
    readonly latency: Histogram;
    readonly non2xx: number;
    readonly errors: number;
    readonly timeouts: number;
  }
  interface Options {
    url: string;
    method?: string;
    connections?: number;
    duration?: number;
    timeout?: number;
    headers?: Record<string, string>;
    body?: string;
    requests?: Array<{ method?: string; path?: string; body?: string }>;
  }
  interface Instance {
    stop(): void;
    on(event: 'done', listener: (result: Result) => void): Instance;
  }
  function autocannon(options: Options): Instance & PromiseLike<Result>;
  namespace autocannon {
    export type { Result };
  }
  export default autocannon;
}
