/**
 * Every answer of the daemon that a test receives is checked against docs/openapi.json:
 * loaded from .mocharc's `require` list, this wraps globalThis.fetch once, and serve.ts's
 * rawRequest calls checkAnswer itself. An answer is the daemon's when it carries X-Request-Id
 * (every answer of its handler does). The operation is found by method and path template; an
 * answer no operation owns (404 ROUTE_NOT_FOUND, 405, a path refused before routing) must be
 * the error body with one of the router's statuses. Then: the status is one the operation
 * documents, the Content-Type one of its media types, the JSON body valid against its
 * schema, and the headers that carry meaning (Link, Retry-After, ...) documented for it. A
 * mismatch throws from the request, so the test that made it fails there.
 */
import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

type Json = Record<string, any>;

export interface Answer {
  readonly method: string;
  /** The path as sent, without the query. */
  readonly path: string;
  readonly status: number;
  readonly header: (name: string) => string | undefined;
  /** The body's text; undefined when it was not read (a HEAD, a stream). */
  readonly text: string | undefined;
}

export class OpenApiMismatch extends Error {
  override readonly name = 'OpenApiMismatch';
}

const DOCUMENT_URL = new URL('../../docs/openapi.json', import.meta.url);
/** Answers of the router before any operation is chosen, and of Node before the router. */
const UNROUTED_STATUSES = new Set([400, 404, 405, 408, 413, 415, 431, 503]);
/** Headers whose presence says something a client acts on: each must be documented where it is sent. */
const MEANINGFUL_HEADERS = ['link', 'retry-after', 'etag', 'location', 'content-disposition', 'www-authenticate'];

interface Checker {
  readonly document: Json;
  readonly ajv: Ajv2020;
  readonly templates: Array<{ path: string; segments: string[] }>;
  readonly validators: Map<string, ValidateFunction>;
}

let checker: Checker | undefined;

function load(): Checker {
  if (checker) return checker;
  const document = JSON.parse(readFileSync(DOCUMENT_URL, 'utf8')) as Json;
  const schemas = JSON.parse(JSON.stringify(document.components.schemas).replaceAll('"#/components/schemas/', '"openapi-schemas#/$defs/')) as Json;
  const ajv = new Ajv2020({ allErrors: true, strict: true });
  // ajv-formats is CommonJS: its function is the default export's default when imported from ESM.
  const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (ajv: Ajv2020) => void;
  addFormats(ajv);
  ajv.addSchema({ $id: 'openapi-schemas', $defs: schemas });
  const templates = Object.keys(document.paths).map((path) => ({ path, segments: path.split('/').slice(1) }));
  // Literal segments before parameters, as a route table would be read.
  templates.sort((a, b) => a.segments.filter((s) => s.startsWith('{')).length - b.segments.filter((s) => s.startsWith('{')).length);
  checker = { document, ajv, templates, validators: new Map() };
  return checker;
}

function validator(key: string, schema: Json): ValidateFunction {
  const { ajv, validators } = load();
  let validate = validators.get(key);
  if (!validate) {
    validate = ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"openapi-schemas#/$defs/')) as Json);
    validators.set(key, validate);
  }
  return validate;
}

function resolve(document: Json, node: Json): Json {
  return typeof node.$ref === 'string' ? resolve(document, node.$ref.slice(2).split('/').reduce((at: Json, part: string) => at[part.replaceAll('~1', '/').replaceAll('~0', '~')], document)) : node;
}

/** The path item the router would pick, or undefined when none fits (or a segment is `.`/`..`). */
function templateOf(path: string): string | undefined {
  let segments: string[];
  try {
    segments = path.split('/').slice(1).map((segment) => decodeURIComponent(segment));
  } catch {
    return undefined;
  }
  if (!path.startsWith('/') || segments.some((segment) => segment === '.' || segment === '..')) return undefined;
  return load().templates.find(({ segments: pattern }) => pattern.length === segments.length && pattern.every((part, i) => part.startsWith('{') || part === segments[i]))?.path;
}

const essence = (type: string) => type.split(';')[0]!.trim().toLowerCase();

/** Throws OpenApiMismatch when the answer is not one the document describes. */
export function checkAnswer(answer: Answer): void {
  const { document } = load();
  const method = answer.method.toUpperCase();
  const template = templateOf(answer.path);
  const operation = template === undefined ? undefined : (document.paths[template][(method === 'HEAD' ? 'GET' : method).toLowerCase()] as Json | undefined);
  const where = `${method} ${answer.path} -> ${answer.status}${operation ? ` (operation ${operation.operationId})` : ' (no operation)'}`;
  const fail = (why: string): never => {
    throw new OpenApiMismatch(`the answer does not match docs/openapi.json: ${where}: ${why}\n${answer.text === undefined ? '' : answer.text.slice(0, 2000)}`);
  };
  let response: Json;
  if (operation) {
    const documented = operation.responses[String(answer.status)] as Json | undefined;
    if (!documented) fail(`status ${answer.status} is not documented (documented: ${Object.keys(operation.responses).join(', ')})`);
    response = resolve(document, documented!);
  } else {
    if (!UNROUTED_STATUSES.has(answer.status)) fail(`no operation serves this, and ${answer.status} is not an answer of the router`);
    response = { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } }, headers: { Allow: {} } };
  }
  const headers = Object.keys(response.headers ?? {}).map((name) => name.toLowerCase());
  const undocumented = MEANINGFUL_HEADERS.filter((name) => answer.header(name) !== undefined && !headers.includes(name));
  if (undocumented.length > 0) fail(`headers not documented for this answer: ${undocumented.join(', ')}`);
  const content = response.content as Record<string, Json> | undefined;
  const type = answer.header('content-type');
  if (!content) {
    if (answer.text) fail(`a body where the document has none (${type})`);
    return;
  }
  if (type === undefined) fail('no Content-Type');
  const mediaType = Object.keys(content).find((candidate) => candidate.toLowerCase() === type!.toLowerCase()) ?? Object.keys(content).find((candidate) => essence(candidate) === essence(type!));
  if (mediaType === undefined) fail(`Content-Type ${type} is not documented (documented: ${Object.keys(content).join(', ')})`);
  if (essence(mediaType!) !== 'application/json' || answer.text === undefined || method === 'HEAD') return;
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    fail('the body is not JSON');
  }
  const validate = validator(`${template ?? '(unrouted)'} ${method} ${answer.status} ${mediaType}`, content[mediaType!]!.schema as Json);
  if (!validate(body)) fail(`the body does not match its schema: ${JSON.stringify(validate.errors, null, 1).slice(0, 3000)}`);
}

/** Every example in the document checked against its schema: what does not match, by place. */
export function exampleMismatches(): string[] {
  const { document } = load();
  const mismatches: string[] = [];
  for (const [path, item] of Object.entries(document.paths as Record<string, Json>)) {
    for (const [method, operation] of Object.entries(item)) {
      for (const [status, documented] of Object.entries(operation.responses as Record<string, Json>)) {
        for (const [type, media] of Object.entries((documented.content ?? {}) as Record<string, Json>)) {
          for (const [name, example] of Object.entries((media.examples ?? {}) as Record<string, Json>)) {
            const validate = validator(`example ${path} ${method} ${status} ${type}`, media.schema as Json);
            if (!validate(example.value)) mismatches.push(`${method.toUpperCase()} ${path} ${status} ${type} example ${name}: ${JSON.stringify(validate.errors)}`);
          }
        }
      }
    }
  }
  return mismatches;
}

/** Installs the wrapper once; a response without X-Request-Id is not the daemon's and passes untouched. */
function installFetchCheck(): void {
  const original = globalThis.fetch as typeof fetch & { openApiChecked?: true };
  if (original.openApiChecked) return;
  const checked = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const response = await original(input, init);
    if (!response.headers.has('x-request-id')) return response;
    const url = new URL(input instanceof Request ? input.url : String(input));
    const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    const type = response.headers.get('content-type') ?? '';
    // Only JSON bodies are read here (a copy of them); a stream is checked by its headers.
    const text = method !== 'HEAD' && /json/i.test(type) ? await response.clone().text() : undefined;
    checkAnswer({ method, path: url.pathname, status: response.status, header: (name) => response.headers.get(name) ?? undefined, text });
    return response;
  };
  globalThis.fetch = Object.assign(checked, { openApiChecked: true as const }) as typeof fetch;
}

installFetchCheck();
