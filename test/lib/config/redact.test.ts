import assert from 'node:assert/strict';
import { redactUrl, unredactUrl } from '../../../src/lib/config/redact.js';

describe('URL redaction', () => {
  it('hides the password, a lone user name, the query and the fragment, and keeps what tells URLs apart', () => {
    assert.equal(redactUrl('https://user:p%40ss@hooks.example.com:8443/a/b?token=t1&x=2#frag'), 'https://user:***@hooks.example.com:8443/a/b?***#***');
    assert.equal(redactUrl('https://sk_live_token@hooks.example.com/'), 'https://***@hooks.example.com/');
    assert.equal(redactUrl('http://hooks.example.com/plain'), 'http://hooks.example.com/plain');
    assert.equal(redactUrl('not a url with secret-value'), '[unparseable URL redacted]');
  });

  it('takes redacted parts back from the stored URL, and refuses when there is none to take', () => {
    const stored = 'https://user:p%40ss@hooks.example.com/a?token=t1#frag';
    assert.equal(unredactUrl(redactUrl(stored), stored), stored);
    assert.equal(unredactUrl('https://user:***@other.example.com/b?***', stored), 'https://user:p%40ss@other.example.com/b?token=t1');
    assert.equal(unredactUrl('https://hooks.example.com/new?x=1', stored), 'https://hooks.example.com/new?x=1', 'a URL without *** is taken as given');
    assert.equal(unredactUrl(redactUrl('https://tok@h.example.com/'), 'https://tok@h.example.com/'), 'https://tok@h.example.com/');
    assert.throws(() => unredactUrl('https://user:***@hooks.example.com/', undefined), /no stored URL/);
    assert.throws(() => unredactUrl('https://hooks.example.com/?***', 'https://hooks.example.com/'), /query is redacted/);
  });
});
