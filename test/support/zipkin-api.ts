/** Zipkin's v2 API as the tracing tests read it (the LocalZipkin of src/devtools/local-zipkin.ts). */
export interface ZipkinSpan {
  traceId: string;
  id: string;
  parentId?: string;
  name: string;
  kind?: string;
  localEndpoint?: { serviceName?: string };
  tags?: Record<string, string>;
  annotations?: { value: string }[];
}

/** GET `<api><path>` as JSON (e.g. `/api/v2/trace/<id>`); throws on an HTTP error. */
export async function zipkinJson<T>(api: string, path: string): Promise<T> {
  const res = await fetch(`${api}${path}`);
  if (!res.ok) throw new Error(`GET ${path}: HTTP ${res.status}`);
  return (await res.json()) as T;
}
