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
	path, perr := s.cfg.Node.PolicyFile()
	v := BrandsView{PolicyPath: path, Brands: []Brand{}, Error: policyErrorDTO(perr)}
	if perr == nil {
		v.Brands = s.brandDTOs(s.cfg.Node.Served())
	}
	return v, nil
}

// editable is the policy the Brands page may edit: never a guessed one.
func (s *Service) editable() (*policy.Policy, error) {
	_, perr := s.cfg.Node.PolicyFile()
	p := s.cfg.Node.Served()
	if perr != nil || p == nil {
		return nil, fmt.Errorf("%w: policy.json has errors; fix the file first (the problems are listed above)", ErrInvalid)
	}
	return p.Clone(), nil
}

// PutBrand creates or replaces brand id (in.ID == id), saves policy.json and serves it;
// *FieldErrors when the brand is not valid. It returns all brands.
func (s *Service) PutBrand(ctx context.Context, id string, in Brand) ([]Brand, error) {
	s.save.Lock()
	defer s.save.Unlock()
	p, err := s.editable()
	if err != nil {
		return nil, err
	}
	nb := policy.Brand{
		ID: in.ID, Name: in.Name, Description: in.Description, Capability: in.Capability, Workspace: in.Workspace,
		AccessMode: in.AccessMode, Scope: policy.Scope{ID: in.Scope.ID, Description: in.Scope.Description},
	}
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
	return s.write(p, idx)
}

// DeleteBrand removes brand id, saves policy.json and serves it. ErrNotFound. It returns all
// brands.
func (s *Service) DeleteBrand(ctx context.Context, id string) ([]Brand, error) {
	s.save.Lock()
	defer s.save.Unlock()
	p, err := s.editable()
	if err != nil {
		return nil, err
	}
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
		return nil, fmt.Errorf("%w: no brand %q", ErrNotFound, id)
	}
	p.Pact.Brands = kept
	return s.write(p, -1)
}

// write validates and saves policy.json atomically (keeping the sections it does not manage),
// then has the node serve the result at once.
func (s *Service) write(p *policy.Policy, idx int) ([]Brand, error) {
	path, _ := s.cfg.Node.PolicyFile()
	if err := policy.Save(path, p); err != nil {
		return nil, fieldErrors(err, idx)
	}
	saved, err := s.cfg.Node.ServeSaved()
	if err != nil {
		return nil, err
	}
	s.PolicyChanged()
	return s.brandDTOs(saved), nil
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
