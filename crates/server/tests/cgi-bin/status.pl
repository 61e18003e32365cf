#!/usr/bin/env perl
# Test CGI: the response kinds of RFC 3875 section 6, chosen by QUERY_STRING.
use strict;
use warnings;
$| = 1;
my $q = $ENV{QUERY_STRING} // '';
if ($q eq 'notfound') {
    print "Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nnothing here\n";
} elsif ($q eq 'client') {
    print "Location: http://example.org/elsewhere\r\n\r\n";
} elsif ($q eq 'moved') {
    print "Status: 301 Moved Permanently\r\nLocation: /new\r\nContent-Type: text/html\r\n\r\n<a href=\"/new\">moved</a>\n";
} elsif ($q eq 'local') {
    print "Location: /cgi-bin/env.sh/via-local?from=local\r\n\r\n";
} elsif ($q eq 'loop') {
    print "Location: /cgi-bin/status.pl?loop\r\n\r\n";
} elsif ($q eq 'json') {
    print "Content-Type: application/json\r\nX-Script: perl\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n{\"ok\":true}\n";
} elsif ($q eq 'nocontent') {
    print "Status: 204 No Content\r\n\r\n";
} elsif ($q eq 'length') {
    print "Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
} elsif ($q eq 'short') {
    print "Content-Type: text/plain\r\nContent-Length: 50\r\n\r\nhello";
} else {
    print "Content-Type: text/plain\r\n\r\ndefault\n";
}
