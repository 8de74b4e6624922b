package owner

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aether/aether/backend/policy"
)

// Brands is the Brands page: policy.json's path, its brands, and why it does not load.
func (s *Service) Brands(ctx context.Context) (BrandsView, error) {
	path, perr := s.policyFile()
	v := BrandsView{PolicyPath: path, Brands: []Brand{}, Error: policyErrorDTO(perr)}
	if perr == nil {
		v.Brands = s.brandDTOs(s.served())
	}
	return v, nil
}

// PutBrand creates or replaces brand id (in.ID must be id), saves policy.json and serves it;
// *FieldErrors when the brand is not valid. It returns all brands.
func (s *Service) PutBrand(ctx context.Context, id string, in Brand) ([]Brand, error) {
	if err := in.CheckID(id); err != nil {
		return nil, err
	}
	nb := policy.Brand{
		ID: in.ID, Name: in.Name, Description: in.Description, Capability: in.Capability, Workspace: in.Workspace,
		AccessMode: in.AccessMode, Scope: policy.Scope{ID: in.Scope.ID, Description: in.Scope.Description},
	}
	return s.modify(func(p *policy.Policy) (int, error) {
		idx := -1
		for i, br := range p.Pact.Brands {
			if string(br.ID) == id {
				idx = i
				nb.Instructions = br.Instructions
			}
		}
		if idx >= 0 {
			p.Pact.Brands[idx] = nb
		} else {
			p.Pact.Brands = append(p.Pact.Brands, nb)
			idx = len(p.Pact.Brands) - 1
		}
		return idx, nil
	})
}

// DeleteBrand removes brand id, saves policy.json and serves it. ErrNotFound. It returns all
// brands.
func (s *Service) DeleteBrand(ctx context.Context, id string) ([]Brand, error) {
	return s.modify(func(p *policy.Policy) (int, error) {
		kept := p.Pact.Brands[:0]
		found := false
		for _, br := range p.Pact.Brands {
			if string(br.ID) == id {
				found = true
				continue
			}
			kept = append(kept, br)
		}
		if !found {
			return -1, fmt.Errorf("%w: no brand %q", ErrNotFound, id)
		}
		p.Pact.Brands = kept
		return -1, nil
	})
}

// modify edits the last good policy with edit, then saves policy.json atomically (keeping the
// sections it does not manage) and serves it at once: one policy.File.Modify, so no hand edit
// or other save comes in between. Never over a file that does not load: that is ErrInvalid.
// edit answers the index of the brand it set (-1 for none), whose problems become per-field
// messages.
func (s *Service) modify(edit func(p *policy.Policy) (brand int, err error)) ([]Brand, error) {
	idx := -1
	saved, err := s.cfg.Policy.Modify(func(p *policy.Policy) (err error) {
		idx, err = edit(p)
		return err
	})
	switch {
	case errors.Is(err, policy.ErrNotLoaded):
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	case err != nil:
		return nil, fieldErrors(err, idx)
	}
	return s.brandDTOs(saved.Policy), nil
}

// fieldErrors turns policy problems about the edited brand into per-field
// messages (the Brand JSON keys); other problems go into the message.
func fieldErrors(err error, idx int) error {
	var perr *policy.Error
	if !errors.As(err, &perr) {
		return err
	}
	fe := &FieldErrors{Message: "The brand was not saved: fix the fields marked below."}
	prefix := fmt.Sprintf("pact.brands[%d].", idx)
	var other []string
	for _, pr := range perr.Problems {
		if idx >= 0 && strings.HasPrefix(pr.Path, prefix) {
			field := strings.TrimPrefix(pr.Path, prefix)
			fe.Fields = append(fe.Fields, FieldError{Field: field, Message: pr.Message})
			continue
		}
		other = append(other, pr.Path+": "+pr.Message)
	}
	if len(other) > 0 {
		fe.Message = "The policy was not saved: " + strings.Join(other, "; ")
	}
	return fe
}
