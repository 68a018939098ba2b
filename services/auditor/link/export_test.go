package link

// PrepareTree is Prepare's non-strict path through the event's tree (Entry,
// then its canonical form and MetaOf), the way Prepare took it for every
// message before it wrote accepted events directly.
func PrepareTree(m *Message, source string) Prepared {
	p, err := prepare(ChainName(m.Stream, m.Subject), Entry(m, source))
	if err != nil {
		p, _ = prepare(p.Chain, Reject(m, source, err))
	}
	return p
}
