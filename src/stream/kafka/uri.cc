#include "stream/kafka/uri.h"

#include <charconv>

namespace surge::stream::kafka {
namespace {

constexpr std::string_view kScheme = "kafka://";
constexpr std::string_view kForm = "kafka://host:port[,host2:port2]/topic?group=name&key=value";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> PercentDecode(std::string_view s, std::string_view uri, std::string_view what) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    int hi = i + 1 < s.size() ? HexValue(s[i + 1]) : -1;
    int lo = i + 2 < s.size() ? HexValue(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      return InvalidArgumentError(
          "kafka URI '{}': bad percent escape in {} '{}' (use %XX with two hex digits)", uri, what,
          s);
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

bool IsUnreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

void PercentEncode(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (IsUnreserved(static_cast<char>(c))) {
      out->push_back(static_cast<char>(c));
    } else {
      out->push_back('%');
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 15]);
    }
  }
}

Status ParsePort(std::string_view port, std::string_view uri, std::string_view broker) {
  int value = 0;
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || p != port.data() + port.size() || value < 1 ||
      value > 65535) {
    return InvalidArgumentError("kafka URI '{}': broker '{}' has port '{}'; a port is 1..65535",
                                uri, broker, port);
  }
  return Status::Ok();
}

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

// One "host[:port]" or "[v6]:port" entry; appends the normalised form ("host:port") to `out`.
Status ParseBroker(std::string_view b, std::string_view uri, std::string* out) {
  if (b.empty()) {
    return InvalidArgumentError("kafka URI '{}': empty broker in the broker list (form: {})", uri,
                                kForm);
  }
  std::string_view host;
  std::string_view port = "9092";
  if (b.front() == '[') {
    size_t close = b.find(']');
    if (close == std::string_view::npos || close == 1) {
      return InvalidArgumentError(
          "kafka URI '{}': broker '{}' opens '[' for an IPv6 address "
          "but has no closing ']'",
          uri, b);
    }
    host = b.substr(0, close + 1);
    std::string_view rest = b.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return InvalidArgumentError("kafka URI '{}': broker '{}': expected ':port' after ']'", uri,
                                    b);
      }
      port = rest.substr(1);
    }
  } else {
    size_t colon = b.rfind(':');
    host = b.substr(0, colon);
    if (colon != std::string_view::npos) port = b.substr(colon + 1);
    for (char c : host) {
      if (!IsHostChar(c)) {
        return InvalidArgumentError(
            "kafka URI '{}': broker host '{}' has the character '{}'; hosts are names or "
            "addresses of [a-zA-Z0-9.-_] (IPv6 in brackets)",
            uri, host, c);
      }
    }
    if (host.empty()) {
      return InvalidArgumentError("kafka URI '{}': broker '{}' has no host", uri, b);
    }
  }
  SURGE_RETURN_IF_ERROR(ParsePort(port, uri, b));
  if (!out->empty()) out->push_back(',');
  out->append(host);
  out->push_back(':');
  out->append(port);
  return Status::Ok();
}

}  // namespace

Status ValidateTopicName(std::string_view topic) {
  if (topic.empty() || topic.size() > 249 || topic == "." || topic == "..") {
    return InvalidArgumentError(
        "topic name '{}' is invalid: a topic is 1..249 characters of [a-zA-Z0-9._-], not '.' or "
        "'..'",
        topic);
  }
  for (char c : topic) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) {
      return InvalidArgumentError(
          "topic name '{}' has the character '{}'; topics use only [a-zA-Z0-9._-]", topic, c);
    }
  }
  return Status::Ok();
}

Result<KafkaUri> KafkaUri::Parse(std::string_view uri) {
  if (uri.substr(0, kScheme.size()) != kScheme) {
    return InvalidArgumentError("'{}' is not a kafka URI: it must start with 'kafka://' (form: {})",
                                uri, kForm);
  }
  std::string_view rest = uri.substr(kScheme.size());
  std::string_view query;
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string_view authority = rest;
  std::string_view path;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  KafkaUri out;
  if (authority.empty()) {
    return InvalidArgumentError("kafka URI '{}' names no broker (form: {})", uri, kForm);
  }
  while (true) {
    size_t comma = authority.find(',');
    SURGE_RETURN_IF_ERROR(ParseBroker(authority.substr(0, comma), uri, &out.brokers));
    if (comma == std::string_view::npos) break;
    authority = authority.substr(comma + 1);
  }
  if (!path.empty()) {
    SURGE_ASSIGN_OR_RETURN(out.topic, PercentDecode(path, uri, "topic"));
    Status valid = ValidateTopicName(out.topic);
    if (!valid.ok()) return valid.WithContext(fmt::format("kafka URI '{}'", uri));
  }
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return InvalidArgumentError("kafka URI '{}': query item '{}' is not key=value", uri, item);
    }
    SURGE_ASSIGN_OR_RETURN(std::string key, PercentDecode(item.substr(0, eq), uri, "key"));
    SURGE_ASSIGN_OR_RETURN(std::string value, PercentDecode(item.substr(eq + 1), uri, "value"));
    if (key == "group" || key == "group.id") {
      if (value.empty()) {
        return InvalidArgumentError("kafka URI '{}': group is empty; give a group id", uri);
      }
      if (!out.group.empty()) {
        return InvalidArgumentError("kafka URI '{}': the consumer group is given twice", uri);
      }
      out.group = std::move(value);
      continue;
    }
    if (key == "bootstrap.servers" || key == "metadata.broker.list") {
      return InvalidArgumentError(
          "kafka URI '{}': '{}' may not be a query parameter; brokers go before the path "
          "(kafka://host1:9092,host2:9092/topic)",
          uri, key);
    }
    for (const auto& [k, v] : out.properties) {
      if (k == key) {
        return InvalidArgumentError("kafka URI '{}': property '{}' is given twice", uri, key);
      }
    }
    out.properties.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

std::string KafkaUri::ToString() const {
  std::string s(kScheme);
  s += brokers;
  s += '/';
  s += topic;
  char sep = '?';
  if (!group.empty()) {
    s += "?group=";
    PercentEncode(group, &s);
    sep = '&';
  }
  for (const auto& [k, v] : properties) {
    s += sep;
    PercentEncode(k, &s);
    s += '=';
    PercentEncode(v, &s);
    sep = '&';
  }
  return s;
}

}  // namespace surge::stream::kafka
