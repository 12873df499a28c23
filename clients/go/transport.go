package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"licenseserver.example/client/offline"
)

// reply is a call to the server, classified the way the fallback chain needs it: an
// answer the server gave on purpose, or unreachable (no connection, a timeout, a 5xx, a
// 429, or a body that is not the API's JSON). Only unreachable moves the chain down.
type reply struct {
	unreachable bool
	reason      string
	status      int
	body        *offline.Object
	// timedOut marks an unreachable server that ran out of time rather than refused:
	// Validate then leaves the network to the reconnect loop (see reconnectingInBackground).
	timedOut bool
}

// maxAnswer bounds what is read of an answer. The API's are a few kilobytes; a longer
// one (a proxy's page, a server gone wrong, a body without end) is not read to its end.
const maxAnswer = 1 << 20

func (c *Client) postJSON(ctx context.Context, path string, body any) reply {
	payload, err := json.Marshal(body)
	if err != nil {
		return reply{unreachable: true, reason: "the request cannot be encoded: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	request, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.baseURL+path, bytes.NewReader(payload))
	if err != nil {
		return reply{unreachable: true, reason: fmt.Sprintf("cannot reach the server (%s)", err.Error())}
	}
	request.Header.Set("Content-Type", "application/json")
	request.Header.Set("Accept", "application/json")
	response, err := c.http.Do(request)
	if err != nil {
		return c.requestFailed(ctx, err)
	}
	defer response.Body.Close()
	data, err := io.ReadAll(io.LimitReader(response.Body, maxAnswer+1))
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return reply{unreachable: true, reason: c.timeoutReason(), timedOut: true}
		}
		return reply{unreachable: true, reason: "the answer was cut off"}
	}
	status := response.StatusCode
	if len(data) > maxAnswer {
		return reply{unreachable: true, reason: fmt.Sprintf("the answer is larger than 1 MiB (HTTP %d)", status)}
	}
	if status >= 500 {
		return reply{unreachable: true, reason: fmt.Sprintf("the server failed (HTTP %d)", status)}
	}
	if status == http.StatusTooManyRequests {
		return reply{unreachable: true, reason: "the server is rate-limiting this machine (HTTP 429)"}
	}
	text := strings.TrimPrefix(strings.ToValidUTF8(string(data), "\uFFFD"), "\uFEFF")
	value, _, _, err := offline.ParseJSON([]byte(text))
	if err != nil {
		return reply{unreachable: true, reason: fmt.Sprintf("the server answered something that is not JSON (HTTP %d)", status)}
	}
	object, ok := value.(*offline.Object)
	if !ok {
		return reply{unreachable: true, reason: fmt.Sprintf("the server answered JSON that is not an object (HTTP %d)", status)}
	}
	return reply{status: status, body: object}
}

func (c *Client) timeoutReason() string {
	return fmt.Sprintf("no answer within %d ms", c.cfg.requestTimeout.Milliseconds())
}

// requestFailed is the reply for a request that got no answer.
func (c *Client) requestFailed(ctx context.Context, err error) reply {
	var netErr net.Error
	timedOut := ctx.Err() == context.DeadlineExceeded || errors.As(err, &netErr) && netErr.Timeout()
	return reply{unreachable: true, reason: c.describeRequestError(ctx, err), timedOut: timedOut}
}

func (c *Client) describeRequestError(ctx context.Context, err error) string {
	// The client's own transport has no deadline but ConnectTimeout (TCP and TLS), and the
	// net package reports that one as context.DeadlineExceeded too: tell it apart first.
	var netErr net.Error
	if c.connectTimeout > 0 && ctx.Err() == nil && errors.As(err, &netErr) && netErr.Timeout() {
		return fmt.Sprintf("no connection within %d ms", c.connectTimeout.Milliseconds())
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded {
		return c.timeoutReason()
	}
	if errors.Is(err, context.Canceled) {
		return "the request was cancelled"
	}
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr):
		return "cannot reach the server (ENOTFOUND)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "cannot reach the server (ECONNREFUSED)"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "cannot reach the server (ECONNRESET)"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "cannot reach the server (EHOSTUNREACH)"
	case errors.Is(err, syscall.ENETUNREACH):
		return "cannot reach the server (ENETUNREACH)"
	case errors.Is(err, syscall.ETIMEDOUT):
		return "cannot reach the server (ETIMEDOUT)"
	}
	var urlErr interface{ Unwrap() error }
	if errors.As(err, &urlErr) && urlErr.Unwrap() != nil {
		return fmt.Sprintf("cannot reach the server (%s)", urlErr.Unwrap().Error())
	}
	return fmt.Sprintf("cannot reach the server (%s)", err.Error())
}

// errorOf is an error answer's {"error": {"code", "message"}}, or HTTP_<status> and a
// generic message.
func errorOf(body *offline.Object, status int, what string) (string, string) {
	code, message := fmt.Sprintf("HTTP_%d", status), fmt.Sprintf("the server refused the %s (HTTP %d)", what, status)
	if body == nil {
		return code, message
	}
	if e, ok := body.Values["error"].(*offline.Object); ok {
		if s, ok := e.Values["code"].(string); ok {
			code = s
		}
		if s, ok := e.Values["message"].(string); ok {
			message = s
		}
	}
	return code, message
}
