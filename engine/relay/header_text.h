// What a NATS message header can carry. A header is a line of text, `Name: value` ended by CR LF,
// and nats.c takes names and values as C strings: a CR or LF in a value would end the line early
// and start a header of the sender's choosing (a second Nats-Msg-Id makes JetStream drop the
// message as a duplicate), and a NUL would cut it.
#pragma once

#include <string>
#include <string_view>

namespace wharf::internal {

// True when `value` can be a header value at all: no CR, LF or NUL.
bool HeaderValueCarries(std::string_view value);

// True when `name` can be a header name: 1 or more bytes, none a control byte, a space or ':'.
bool HeaderNameCarries(std::string_view name);

// True when `key` travels as Wharf-Key and arrives as it was: valid UTF-8 (clients read headers as
// text), not empty, no control byte (below 0x20, or 0x7f) and no space at either end (readers trim
// them). Others go as Wharf-Key-B64.
bool KeyReadsAsText(std::string_view key);

// Standard base64 (RFC 4648, with padding).
std::string Base64(std::string_view bytes);

}  // namespace wharf::internal
