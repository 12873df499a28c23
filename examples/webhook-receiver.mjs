// A webhook receiver for license-server: checks the signature, drops repeated deliveries.
// Usage: WEBHOOK_SECRET=... node webhook-receiver.mjs [port]
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

const secret = process.env.WEBHOOK_SECRET;
if (!secret) throw new Error('set WEBHOOK_SECRET to the webhook\'s secret');
// Delivery ids already handled. Keep them in your database, with the work they caused.
const handled = new Set();

function signatureValid(body, header) {
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(body).digest('hex')}`);
  const given = Buffer.from(String(header ?? ''));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const server = createServer((request, response) => {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    // The signature covers the exact bytes received: check it before parsing them.
    const body = Buffer.concat(chunks);
    if (!signatureValid(body, request.headers['x-license-server-signature'])) {
      response.writeHead(401).end();
      return;
    }
    const delivery = String(request.headers['x-license-server-delivery']);
    if (!handled.has(delivery)) {
      handled.add(delivery);
      const event = JSON.parse(body.toString('utf8'));
      console.log(JSON.stringify({ delivery, event: event.event, occurred_at: event.occurred_at, data: event.data }));
    }
    // 2xx for a repeat too: it was handled, and anything else makes the server retry it.
    response.writeHead(204).end();
  });
});
server.listen(Number(process.argv[2] ?? 8080), '127.0.0.1', () => console.error(`listening on port ${server.address().port}`));
